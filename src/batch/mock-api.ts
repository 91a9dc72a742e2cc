import { randomBytes, randomInt } from 'node:crypto';
import { MockProvider } from '../provider/mock.js';
import { ProviderError } from '../provider/types.js';
import type { BatchApi, BatchPage, ProviderBatch } from './api.js';

export interface MockBatchApiOptions {
  /** How long a batch takes, compressed from the real API's hours. @default 1000 */
  readonly completeAfterMs?: number;
  /** Share of lines answered with an HTTP 500 in the output file, as `--mock-failure-rate` online. @default 0 */
  readonly failureRate?: number;
  readonly now?: () => number;
}

interface MockBatch {
  readonly id: string;
  readonly inputFileId: string;
  readonly metadata: Record<string, string>;
  readonly createdAt: number;
  /** Lines of its input file. */
  readonly lines: number;
  status: string;
  outputFileId: string | null;
  /** Lines answered once it ended (all when completed, those answered by then when cancelled). */
  answered: number;
  /** Of them, lines answered with an error (`failureRate`). */
  failed: number;
}

/**
 * The offline Batch API behind `--provider mock --via batch`: it lives in this process, answers every
 * line the way the mock provider answers online (`--mock-failure-rate` too: such lines carry an HTTP 500), and completes a batch after `completeAfterMs`; a
 * batch cancelled before then keeps the lines answered by then (in proportion to its time), as the
 * real API's output file does.
 * A batch left by a process that ended is unknown to the next one (404), so its jobs are resubmitted.
 */
export class MockBatchApi implements BatchApi {
  readonly #files = new Map<string, string>();
  readonly #batches = new Map<string, MockBatch>();
  readonly #answers: MockProvider;
  readonly #completeAfterMs: number;
  readonly #now: () => number;
  #seq = 0;
  /**
   * In every id: each process has its own mock API, and ids counted from 1 again clashed with the
   * batches an earlier process had recorded in the queue (a second `run --via batch` failed).
   */
  readonly #tag = randomBytes(4).toString('hex');

  constructor(options: MockBatchApiOptions = {}) {
    this.#completeAfterMs = options.completeAfterMs ?? 1000;
    this.#now = options.now ?? Date.now;
    // its failures drawn afresh by each process, as the online mock's (a line put back fails at other tries)
    this.#answers = new MockProvider({ latencyMs: 0, failureRate: options.failureRate ?? 0, seed: randomInt(2 ** 31) });
  }

  async uploadFile(_name: string, content: string): Promise<string> {
    const id = `file-mock-${this.#tag}-${++this.#seq}`;
    this.#files.set(id, content);
    return id;
  }

  async createBatch(inputFileId: string, metadata: Readonly<Record<string, string>>): Promise<ProviderBatch> {
    const input = this.#files.get(inputFileId);
    if (input === undefined) throw notFound(`file ${inputFileId}`);
    const b: MockBatch = {
      id: `batch_mock-${this.#tag}-${++this.#seq}`,
      inputFileId,
      metadata: { ...metadata },
      createdAt: this.#now(),
      lines: input.split('\n').filter((l) => l.trim() !== '').length,
      status: 'in_progress',
      outputFileId: null,
      answered: 0,
      failed: 0,
    };
    this.#batches.set(b.id, b);
    return this.#view(b);
  }

  async getBatch(id: string): Promise<ProviderBatch> {
    const b = this.#batches.get(id);
    if (!b) throw notFound(`batch ${id}`);
    if (b.status === 'in_progress' && this.#now() - b.createdAt >= this.#completeAfterMs) await this.#finish(b);
    return this.#view(b);
  }

  async listBatches(): Promise<BatchPage> {
    return { batches: [...this.#batches.values()].reverse().map((b) => this.#view(b)), hasMore: false };
  }

  async fileContent(id: string): Promise<string> {
    const content = this.#files.get(id);
    if (content === undefined) throw notFound(`file ${id}`);
    return content;
  }

  async cancelBatch(id: string): Promise<ProviderBatch> {
    const b = this.#batches.get(id);
    if (!b) throw notFound(`batch ${id}`);
    // as the real API does: the requests answered by then are in the output file, the rest are not run
    if (b.status === 'in_progress') await this.#end(b, 'cancelled', this.#answeredBy(b));
    return this.#view(b);
  }

  async #finish(b: MockBatch): Promise<void> {
    await this.#end(b, 'completed', b.lines);
  }

  /** Ends `b` with its first `answered` lines answered in an output file (none: no file). */
  async #end(b: MockBatch, status: 'completed' | 'cancelled', answered: number): Promise<void> {
    const lines: string[] = [];
    let failed = 0;
    const signal = new AbortController().signal;
    for (const line of this.#files.get(b.inputFileId)!.split('\n')) {
      if (lines.length === answered) break;
      if (line.trim() === '') continue;
      const { custom_id, body } = JSON.parse(line);
      const response = await this.#answers.complete(JSON.stringify(body), { signal }).then(
        (answer) => ({ status_code: 200, request_id: '', body: JSON.parse(answer.body) }),
        // a request the provider failed is a line of the output file with its status and error body, as the real API writes it
        (error: ProviderError) => {
          failed++;
          // the body's message without the status, which the reader of the line puts in front again
          const message = error.message.replace(/^HTTP \d{3}: /, '');
          return { status_code: error.status ?? 500, request_id: '', body: { error: { message, type: 'server_error' } } };
        },
      );
      lines.push(JSON.stringify({ id: `batch_req_${++this.#seq}`, custom_id, response, error: null }));
    }
    if (lines.length > 0) {
      const outputFileId = `file-mock-${this.#tag}-${++this.#seq}`;
      this.#files.set(outputFileId, lines.join('\n') + '\n');
      b.outputFileId = outputFileId;
    }
    b.answered = lines.length - failed;
    b.failed = failed;
    b.status = status;
  }

  /** While it runs, answered in proportion to the time it has had, as a real batch's counts grow. */
  #answeredBy(b: MockBatch): number {
    return Math.min(b.lines, Math.floor((b.lines * (this.#now() - b.createdAt)) / this.#completeAfterMs));
  }

  #view(b: MockBatch): ProviderBatch {
    return {
      id: b.id,
      status: b.status,
      outputFileId: b.outputFileId,
      errorFileId: null,
      metadata: b.metadata,
      counts: { total: b.lines, completed: b.status === 'in_progress' ? this.#answeredBy(b) : b.answered, failed: b.failed },
      errors: [],
      createdAt: b.createdAt,
    };
  }
}

function notFound(what: string): ProviderError {
  return new ProviderError({
    message: `HTTP 404: No such ${what} (the mock Batch API keeps batches only while its process runs)`,
    scope: 'job',
    reason: 'bad_request',
    status: 404,
  });
}
