// A process in the middle of a bulk load, for a test to kill: node bulk-load-child.mjs <postgres url>.
// Loads two batches into the fresh queue, says "loading" on stdout, and keeps loading until killed.
import { createHash } from 'node:crypto';
import { PostgresStore } from '../../dist/store/postgres/store.js';

const store = await PostgresStore.open(process.argv[2]);
const batch = (b) =>
  Array.from({ length: 1500 }, (_, i) => {
    const request = JSON.stringify({ messages: [{ content: `loaded ${b} ${i}`, role: 'user' }], model: 'mock-1' });
    const key = createHash('sha256').update(request).digest('hex');
    return { itemId: `d${b * 1500 + i}`, source: 'child', meta: null, key, request, model: 'mock-1', priority: 0 };
  });
store.beginLoad();
for (let b = 0; ; b++) {
  await store.enqueue(batch(b), Date.now());
  if (b === 1) process.stdout.write('loading\n');
}
