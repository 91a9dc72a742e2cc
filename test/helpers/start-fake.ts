import { onTestFinished } from 'vitest';
import { FakeOpenAI, type FakeOpenAIOptions } from './fake-openai.js';

/**
 * The HTTP fake for the current test: started here and closed when the test finishes, passed or
 * failed. Call it inside a test (or a helper a test calls), not in beforeAll.
 */
export async function startFake(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const fake = await FakeOpenAI.start(options);
  onTestFinished(() => fake.close());
  return fake;
}
