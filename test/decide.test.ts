import { describe, expect, it } from 'vitest';
import { decide, MAX_UNCOUNTED_OUTAGES, type FailureFacts } from '../src/scheduler/decide.js';
import type { ErrorScope, FailureReason } from '../src/provider/types.js';

/** Facts of a try that failed on its first attempt of 5, on a provider that answered others. */
function facts(reason: FailureReason, scope: ErrorScope, status: number | null, over: Partial<FailureFacts> = {}): FailureFacts {
  return {
    error: { reason, scope, status, message: `HTTP ${status}: ${reason}` },
    attempt: 1,
    maxAttempts: 5,
    answered: true,
    early404s: 0,
    earlyParameterRefusals: 0,
    ownParameterRefusals: 0,
    authInARow: 0,
    ownAuthRefusals: 0,
    answeredSinceRefused: false,
    outage: false,
    uncountedOutages: 0,
    providerUpSince: false,
    outageAgeMs: 0,
    rateLimitWaitMs: 700,
    rateLimitPausedLane: true,
    retryAfterMs: null,
    nextProbeInMs: 2000,
    retryDelayMs: 1000,
    maxRetryDelayMs: 60_000,
    random: 0,
    ...over,
  };
}

/**
 * Every row of the table "What happens when a request fails" (docs/commands.md): what the job, the lane and
 * the run do.
 */
describe('decide: the failure policy', () => {
  const rows: Array<[string, FailureFacts, ReturnType<typeof decide>]> = [
    ['network error: retried after backoff, counted', facts('network', 'retryable', null), { kind: 'retry', delayMs: 1000, counted: true }],
    ['timeout: counted, a tenth of the first backoff', facts('timeout', 'retryable', null), { kind: 'retry', delayMs: 100, counted: true }],
    [
      '5xx: counted, backoff doubles with the attempt',
      facts('server', 'retryable', 503, { attempt: 3 }),
      { kind: 'retry', delayMs: 4000, counted: true },
    ],
    [
      '5xx with Retry-After: counted, and waits at least as long as the server asked',
      facts('server', 'retryable', 503, { retryAfterMs: 30_000 }),
      { kind: 'retry', delayMs: 30_000, counted: true },
    ],
    [
      'a Retry-After past the longest backoff: the longest backoff',
      facts('server', 'retryable', 503, { retryAfterMs: 3_600_000 }),
      { kind: 'retry', delayMs: 60_000, counted: true },
    ],
    [
      'a Retry-After shorter than the backoff: the backoff',
      facts('server', 'retryable', 503, { attempt: 3, retryAfterMs: 1000 }),
      { kind: 'retry', delayMs: 4000, counted: true },
    ],
    [
      'outage with Retry-After: not counted, waits for the later of the probe and the server',
      facts('server', 'retryable', 503, { outage: true, retryAfterMs: 30_000 }),
      { kind: 'retry', delayMs: 30_000, counted: false },
    ],
    ['408 / 409: as 5xx', facts('server', 'retryable', 409), { kind: 'retry', delayMs: 1000, counted: true }],
    ['jitter up to x2', facts('server', 'retryable', 500, { random: 0.5 }), { kind: 'retry', delayMs: 1500, counted: true }],
    [
      'backoff is capped',
      facts('server', 'retryable', 500, { attempt: 4, maxRetryDelayMs: 3000 }),
      { kind: 'retry', delayMs: 3000, counted: true },
    ],
    ['bad body (200 not a completion): counted', facts('bad_body', 'retryable', 200), { kind: 'retry', delayMs: 1000, counted: true }],
    [
      "bad bodies from a gateway that opened the breaker: an outage's, not counted",
      facts('bad_body', 'retryable', 200, { outage: true, attempt: 5 }),
      { kind: 'retry', delayMs: 2000, counted: false },
    ],
    [
      'last attempt used: failed with the count',
      facts('server', 'retryable', 500, { attempt: 5 }),
      { kind: 'fail', message: 'gave up after 5 attempts: HTTP 500: server' },
    ],
    [
      'outage (breaker open): not counted, wait for the probe',
      facts('network', 'retryable', null, { outage: true, attempt: 5 }),
      { kind: 'retry', delayMs: 2000, counted: false },
    ],
    [
      'outage, but this job broke it 5 times while others got answers: counted',
      facts('network', 'retryable', null, { outage: true, uncountedOutages: MAX_UNCOUNTED_OUTAGES, providerUpSince: true }),
      { kind: 'retry', delayMs: 1000, counted: true },
    ],
    [
      'outage for over half an hour: counted again',
      facts('server', 'retryable', 503, { outage: true, outageAgeMs: 31 * 60_000 }),
      { kind: 'retry', delayMs: 1000, counted: true },
    ],
    [
      '429: not counted, the lane pauses',
      facts('rate_limit', 'retryable', 429, { attempt: 5 }),
      { kind: 'retry', delayMs: 700, counted: false, pauseLane: true },
    ],
    [
      "429 taken for the provider's noise: not counted, only the job waits",
      facts('rate_limit', 'retryable', 429, { rateLimitPausedLane: false }),
      { kind: 'retry', delayMs: 700, counted: false, pauseLane: false },
    ],
    ['429 insufficient_quota: stop the run', facts('quota', 'run', 429), { kind: 'stop' }],
    [
      "a model's quota per day spent: close its lane (its jobs wait, other models go on)",
      facts('quota', 'model', 429),
      { kind: 'closeLane' },
    ],
    ['400: the job fails', facts('bad_request', 'job', 400), { kind: 'fail', message: 'HTTP 400: bad_request' }],
    ['413 / 422: the job fails', facts('bad_request', 'job', 422), { kind: 'fail', message: 'HTTP 422: bad_request' }],
    ['too long for the model: the job fails', facts('too_long', 'job', 400), { kind: 'fail', message: 'HTTP 400: too_long' }],
    ['404 after answers: the job fails', facts('bad_request', 'job', 404), { kind: 'fail', message: 'HTTP 404: bad_request' }],
    [
      '404 before any answer: retried, the attempt given back (the endpoint may be wrong)',
      facts('bad_request', 'job', 404, { answered: false, early404s: 1 }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      '404 before any answer on the last attempt: still given back, not failed',
      facts('bad_request', 'job', 404, { answered: false, early404s: 2, attempt: 5 }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      'third 404 in a row before any answer: stop (wrong --base-url)',
      facts('bad_request', 'job', 404, { answered: false, early404s: 3 }),
      { kind: 'stop' },
    ],
    [
      '405 or 501 before any answer (a server that takes no POST there): given back, as a 404',
      facts('bad_request', 'job', 405, { answered: false, early404s: 1 }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      'third 501 in a row before any answer: stop (wrong --base-url)',
      facts('bad_request', 'job', 501, { answered: false, early404s: 3 }),
      { kind: 'stop' },
    ],
    [
      "400 refusing a shared parameter (max_tokens) before any answer: retried, the attempt given back (every job's request may be wrong)",
      facts('bad_request', 'job', 400, { answered: false, earlyParameterRefusals: 2, ownParameterRefusals: 1 }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      "the same job refused again for a shared parameter, before two others were: it fails (the parameter is its own, as a Batch line's response_format)",
      facts('bad_request', 'job', 400, { answered: false, earlyParameterRefusals: 2, ownParameterRefusals: 2 }),
      { kind: 'fail', message: 'HTTP 400: bad_request' },
    ],
    [
      'third refusal of the same shared parameter in a row before any answer: stop (the jobs need enqueueing with it changed)',
      facts('bad_request', 'job', 400, { answered: false, earlyParameterRefusals: 3, ownParameterRefusals: 2 }),
      { kind: 'stop' },
    ],
    [
      'a shared parameter refused after answers: the job fails (its own request)',
      facts('bad_request', 'job', 400, { earlyParameterRefusals: 3 }),
      { kind: 'fail', message: 'HTTP 400: bad_request' },
    ],
    ['401 before any answer: stop (wrong key)', facts('auth', 'run', 401, { answered: false, authInARow: 1 }), { kind: 'stop' }],
    [
      'first 403 of a job after the key worked: tried again, attempt given back (it may be a key being revoked)',
      facts('auth', 'run', 403, { authInARow: 1, ownAuthRefusals: 1 }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      '403 of a job refused before, others answered between: that job fails (a model the key may not use)',
      facts('auth', 'run', 403, { authInARow: 1, ownAuthRefusals: 2, answeredSinceRefused: true }),
      { kind: 'fail', message: 'HTTP 403: auth' },
    ],
    [
      '403 of a job refused before, nothing sent since answered (answers to requests out before say nothing): tried again',
      facts('auth', 'run', 403, { authInARow: 2, ownAuthRefusals: 2, answeredSinceRefused: false }),
      { kind: 'retry', delayMs: 1000, counted: false },
    ],
    [
      '401 invalid_api_key after the key worked: stop at once (revoked)',
      facts('auth', 'run', 401, {
        authInARow: 1,
        ownAuthRefusals: 1,
        error: { reason: 'auth', scope: 'run', status: 401, message: 'HTTP 401', code: 'invalid_api_key' },
      }),
      { kind: 'stop' },
    ],
    ['third 401/403 in a row: stop (key revoked)', facts('auth', 'run', 401, { authInARow: 3 }), { kind: 'stop' }],
    [
      'EMFILE (local): not counted, lower concurrency',
      facts('local', 'retryable', null),
      { kind: 'retry', delayMs: 200, counted: false, shrink: true },
    ],
  ];
  it.each(rows)('%s', (_name, f, expected) => {
    expect(decide(f)).toEqual(expected);
  });
});
