import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { budgetedCompletionTokens, estimatePromptTokens } from '../provider/tokens.js';
import { startModuleWorker } from '../worker-module.js';

/**
 * What the estimate adds up of each request, two numbers a request: its prompt's tokens as llmq's
 * tokenizer counts them, and its `max_tokens` (0 when it sets none).
 */
export function measureRequests(requests: readonly string[]): Float64Array {
  const out = new Float64Array(requests.length * 2);
  for (let i = 0; i < requests.length; i++) {
    const request = JSON.parse(requests[i]!) as Parameters<typeof estimatePromptTokens>[0];
    out[2 * i] = estimatePromptTokens(request);
    out[2 * i + 1] = budgetedCompletionTokens(request);
  }
  return out;
}

/** Measures batches of requests, each answer in the order its batch was given. */
export interface Measurer {
  measure(requests: readonly string[]): Promise<Float64Array>;
  close(): Promise<void>;
}

/** On this thread: for a small queue, where starting workers (each loads the tokenizer, ~0.4 s) costs more than it saves. */
export const measureHere: Measurer = {
  measure: async (requests) => measureRequests(requests),
  close: async () => {},
};

/** The threads to count on by default: one per core, at most four (the tokenizer's tables take ~65 MB in each). */
export function defaultMeasureThreads(): number {
  return Math.min(4, availableParallelism());
}

/**
 * Counting prompts is most of an estimate's time (100,000 prompts of 1 KB: 2.9 of 4 s, on one
 * thread); reading the queue is little. `threads` workers count batches given round-robin, each
 * in the order given, so the answers come back in that order too.
 */
export function measureOnThreads(threads: number): Measurer {
  const workers: MeasureWorker[] = [];
  try {
    for (let i = 0; i < threads; i++) workers.push(new MeasureWorker());
  } catch {
    // no thread to be had (a process or memory limit): counting here is slower, and as right
    for (const w of workers) void w.close();
    return measureHere;
  }
  let next = 0;
  return {
    measure: (requests) => workers[next++ % workers.length]!.measure(requests),
    close: async () => {
      await Promise.all(workers.map((w) => w.close()));
    },
  };
}

interface Waiting {
  readonly resolve: (figures: Float64Array) => void;
  readonly reject: (error: Error) => void;
}

class MeasureWorker {
  readonly #worker: Worker;
  readonly #waiting: Waiting[] = [];
  #failed: Error | null = null;

  constructor() {
    // a batch's requests and figures are all it holds besides the tokenizer
    this.#worker = startModuleWorker(import.meta.url, 'prompt-measure-worker', {
      workerData: null,
      resourceLimits: { maxYoungGenerationSizeMb: 16 },
    });
    this.#worker.on('message', (figures: Float64Array) => this.#waiting.shift()?.resolve(figures));
    this.#worker.on('error', (error) => this.#fail(error));
    this.#worker.on('exit', (code) => this.#fail(new Error(`a prompt-counting thread stopped (exit code ${code})`)));
  }

  measure(requests: readonly string[]): Promise<Float64Array> {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      this.#worker.postMessage(requests);
    });
  }

  async close(): Promise<void> {
    this.#waiting.length = 0;
    await this.#worker.terminate();
  }

  #fail(error: Error): void {
    this.#failed ??= error;
    for (const w of this.#waiting.splice(0)) w.reject(this.#failed);
  }
}
