// The test fake of the OpenAI API in its own process, so a bench's client and server don't share a core.
// Prints its URL on the first line of stdout; reads JSON commands on stdin, one a line:
//   {"configure": {...}}  options as FakeOpenAI takes them, plus `latencySpreadMs` (latency uniform over
//                         latencyMs ± latencySpreadMs; functions cannot cross a pipe)
// Two more, at start only, answer before the limits with a 429 that says no limit (no x-ratelimit-*
// header, `retry-after-ms: 0`): `unsaid429Rate`, the share of requests so refused at random (an
// overloaded upstream behind a gateway), and `proxyRpm`, a proxy in front allowing proxyRpm/60
// requests in each 1-second window and refusing the rest.
//   {"clear": true}       forget requests and counts;  {"resetLimits": true}  refill the rate-limit budgets
//   {"stats": true}       answers one JSON line: see Stats in helpers.ts
import { createInterface } from 'node:readline';
import { chance, FakeOpenAI, reply, uniformLatency, type FakeOpenAIOptions } from '../test/helpers/fake-openai.js';
import { countTextTokens } from '../src/provider/tokens.js';

type WireOptions = FakeOpenAIOptions & { latencySpreadMs?: number; unsaid429Rate?: number; proxyRpm?: number };

/** The options as FakeOpenAI takes them: a spread around a number becomes a latency function. */
function fromWire({ latencySpreadMs, unsaid429Rate: _rate, proxyRpm: _proxy, ...options }: WireOptions): FakeOpenAIOptions {
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
const proxyWindows = new Map<number, number>();
/** The proxy in front (`proxyRpm`) refuses this request: its 1-second window is full. */
function proxyRefuses(at: number): boolean {
  if (!options.proxyRpm) return false;
  const second = Math.floor(at / 1000);
  const n = proxyWindows.get(second) ?? 0;
  if (n >= options.proxyRpm / 60) return true;
  proxyWindows.set(second, n + 1);
  if (proxyWindows.size > 4) proxyWindows.delete(second - 4);
  return false;
}
fake.respond((r) => {
  if (!firstAt) firstAt = r.receivedAt;
  lastAt = r.receivedAt;
  // a draw of its own, apart from the hangs' and the latencies'
  const unsaid = (options.unsaid429Rate ?? 0) > 0 && chance(0x2c1b3c6d, r.index) < options.unsaid429Rate!;
  return unsaid || proxyRefuses(r.receivedAt) ? reply.rateLimited(0) : undefined;
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
    limitedAt: fake.requests.filter((r) => r.answered === 429).map((r) => r.receivedAt),
  };
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.configure) fake.configure(fromWire(cmd.configure));
  if (cmd.clear) {
    fake.clear();
    firstAt = lastAt = 0;
  }
  if (cmd.resetLimits) {
    fake.resetLimits();
    proxyWindows.clear();
  }
  if (cmd.stats) process.stdout.write(JSON.stringify(stats()) + '\n');
}
await fake.close();
