// A worker thread of a large estimate (prompt-measure.ts): counts the prompts of each batch of
// requests it is sent, in the order sent, and sends back their figures (the buffer moves, not copied).
import { parentPort } from 'node:worker_threads';
import { measureRequests } from './prompt-measure.js';

const port = parentPort!;
port.on('message', (requests: string[]) => {
  const figures = measureRequests(requests);
  port.postMessage(figures, [figures.buffer as ArrayBuffer]);
});
