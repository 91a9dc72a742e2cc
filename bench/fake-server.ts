// The test fake of the OpenAI API in its own process, so a bench's client and server don't share a core.
// Prints its URL on the first line of stdout; reads JSON commands on stdin, one a line:
//   {"configure": {...}}  options as FakeOpenAI takes them, plus `latencySpreadMs` (latency uniform over
//                         latencyMs ± latencySpreadMs; functions cannot cross a pipe)
//   {"clear": true}       forget requests and counts;  {"resetLimits": true}  refill the rate-limit budgets
//   {"stats": true}       answers one JSON line: see Stats in helpers.ts
import { createInterface } from 'node:readline';
import { FakeOpenAI, uniformLatency, type FakeOpenAIOptions } from '../test/helpers/fake-openai.js';
import { countTextTokens } from '../src/provider/tokens.js';

type WireOptions = FakeOpenAIOptions & { latencySpreadMs?: number };

/** The options as FakeOpenAI takes them: a spread around a number becomes a latency function. */
function fromWire({ latencySpreadMs, ...options }: WireOptions): FakeOpenAIOptions {
  if (!latencySpreadMs || typeof options.latencyMs !== 'number') return options;
  return { ...options, latencyMs: uniformLatency(options.latencyMs, latencySpreadMs, options.seed) };
}

const options: WireOptions = JSON.parse(process.argv[2] ?? '{}');
// Load the tokenizer (~1 s) before serving: a real provider's first answer is not slower than the rest.
countTextTokens('warm up');
const fake = await FakeOpenAI.start({ record: false, ...fromWire(options) });
process.stdout.write(fake.url + '\n');
// first and last arrival, for rates measured over the busy span rather than including process start
let firstAt = 0;
let lastAt = 0;
fake.respond((r) => {
  if (!firstAt) firstAt = r.receivedAt;
  lastAt = r.receivedAt;
  return undefined;
});

function stats(): object {
  return {
    received: fake.received,
    rateLimited: fake.rateLimited,
    maxInFlight: fake.maxInFlight,
    duplicates: fake.duplicates().length,
    firstAt,
    lastAt,
    ok: fake.answers.get(200) ?? 0,
    hung: fake.answers.get('hang') ?? 0,
    // arrivals of the requests answered 200, when requests are recorded (`record: true`)
    okAt: fake.requests.filter((r) => r.answered === 200).map((r) => r.receivedAt),
  };
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.configure) fake.configure(fromWire(cmd.configure));
  if (cmd.clear) {
    fake.clear();
    firstAt = lastAt = 0;
  }
  if (cmd.resetLimits) fake.resetLimits();
  if (cmd.stats) process.stdout.write(JSON.stringify(stats()) + '\n');
}
await fake.close();
