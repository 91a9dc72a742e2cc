import { describe, expect, it } from 'vitest';
import { laneBaseUrl } from '../src/cli/lane-base-url.js';

// An endpoint as the queue records it (lanes, batches, a batch run's options, the collect command
// status proposes): what tells endpoints apart, never what authenticates to one.
describe('laneBaseUrl', () => {
  it('keeps scheme, host, port and path; drops the query and fragment; a URL with a user or password is refused before', () => {
    expect(laneBaseUrl({ provider: 'openai', baseUrl: 'http://127.0.0.1:8080/v1/?api-key=sk-other#frag' })).toBe(
      'http://127.0.0.1:8080/v1',
    );
    expect(() => laneBaseUrl({ provider: 'openai', baseUrl: 'http://me:sk-secret@127.0.0.1:8080/v1' })).toThrow(/user name or password/);
  });

  it('names the offline mock as mock', () => {
    expect(laneBaseUrl({ provider: 'mock' })).toBe('mock');
  });
});
