// The test fake of the OpenAI API in its own process, so a bench's client and server don't share a core.
// Prints its URL on the first line of stdout; reads JSON commands on stdin ({"configure": {...}}, {"stats": true}).
import { createInterface } from 'node:readline';
import { FakeOpenAI } from '../test/helpers/fake-openai.js';

const options = JSON.parse(process.argv[2] ?? '{}');
const fake = await FakeOpenAI.start({ record: false, ...options });
process.stdout.write(fake.url + '\n');
// first and last arrival, for rates measured over the busy span rather than including process start
let firstAt = 0;
let lastAt = 0;
fake.respond((r) => {
  if (!firstAt) firstAt = r.receivedAt;
  lastAt = r.receivedAt;
  return undefined;
});
for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.configure) fake.configure(cmd.configure);
  if (cmd.clear) fake.clear();
  if (cmd.stats) {
    process.stdout.write(JSON.stringify({ received: fake.received, rateLimited: fake.rateLimited, maxInFlight: fake.maxInFlight, duplicates: fake.duplicates().length, firstAt, lastAt }) + '\n');
  }
}
await fake.close();
