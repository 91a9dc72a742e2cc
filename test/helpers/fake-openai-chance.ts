/**
 * Reproducible randomness for the fake: a draw depends only on a seed and a request's index, so a
 * run that sends the same number of requests meets the same hangs and latencies, whatever the order
 * its concurrent requests happen to arrive in.
 */
import type { FakeRequest } from './fake-openai-replies.js';

/** A number in [0, 1) for (seed, index): a 32-bit integer hash (mulberry32's finalizer). */
export function chance(seed: number, index: number): number {
  let t = (Math.imul(seed | 0, 0x9e3779b1) ^ Math.imul(index | 0, 0x85ebca6b)) + 0x6d2b79f5;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
}

/** A `latencyMs` option uniform over `mean ± spread` ms, e.g. `uniformLatency(200, 50)`. */
export function uniformLatency(mean: number, spread: number, seed = 1): (req: FakeRequest) => number {
  // a different stream from the hang draws, which use the seed as it is
  return (req) => Math.max(0, mean - spread + 2 * spread * chance(seed ^ 0x5bd1e995, req.index));
}
