import { join } from 'node:path';
import { OpenAIProvider } from '../../src/provider/openai.js';
import type { RunOptions } from '../../src/scheduler/run-queue.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { FakeOpenAI } from './fake-openai.js';
import { startFake } from './start-fake.js';
import { tempDir } from './tmp.js';

/** The HTTP fake and a fresh queue beside it, for runQueue in this process. */
export async function setup(fakeOptions: Parameters<typeof startFake>[0] = {}) {
  const fake = await startFake(fakeOptions);
  const path = join(tempDir(), 'q.db');
  return { fake, store: new SqliteStore(path), path };
}

/** Run options with short retries, heartbeats and probes: a test's run ends in seconds. */
export const fast: RunOptions = {
  retryDelayMs: 10,
  maxRetryDelayMs: 50,
  heartbeatMs: 200,
  outage: { probeDelayMs: 100, maxProbeDelayMs: 400 },
};

export const provider = (fake: FakeOpenAI, timeoutMs = 30_000) =>
  new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs });
