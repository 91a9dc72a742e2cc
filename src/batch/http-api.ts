import { classifyHttpError, classifyNetworkError } from '../provider/classify.js';
import { endpointUrl, normalizeBaseUrl } from '../provider/endpoint.js';
import { readProviderBatch, type BatchApi, type BatchPage, type ProviderBatch } from './api.js';

export interface HttpBatchApiOptions {
  /** The API base including its version, e.g. `https://api.openai.com/v1`. */
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** Per call. Uploads and downloads of large files take a while. @default 600000 */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
}

/**
 * OpenAI's Batch API over HTTP: `/files`, `/batches`, `/files/{id}/content`. Every failure is a
 * ProviderError classified like an online request's (retryable, job or run scope).
 */
export class HttpBatchApi implements BatchApi {
  readonly #base: string;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: HttpBatchApiOptions) {
    this.#base = normalizeBaseUrl(options.baseUrl);
    this.#apiKey = options.apiKey || undefined;
    this.#timeoutMs = options.timeoutMs ?? 600_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  async uploadFile(name: string, content: string, signal?: AbortSignal): Promise<string> {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([content], { type: 'application/jsonl' }), name);
    const json = JSON.parse(await this.#call('POST', '/files', form, signal));
    return String(json.id);
  }

  async createBatch(inputFileId: string, metadata: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<ProviderBatch> {
    const body = JSON.stringify({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata });
    return readProviderBatch(JSON.parse(await this.#call('POST', '/batches', body, signal)));
  }

  async getBatch(id: string, signal?: AbortSignal): Promise<ProviderBatch> {
    return readProviderBatch(JSON.parse(await this.#call('GET', `/batches/${encodeURIComponent(id)}`, null, signal)));
  }

  async listBatches(after: string | null, signal?: AbortSignal): Promise<BatchPage> {
    const query = `?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`;
    const json = JSON.parse(await this.#call('GET', `/batches${query}`, null, signal));
    return { batches: (Array.isArray(json.data) ? json.data : []).map(readProviderBatch), hasMore: json.has_more === true };
  }

  fileContent(id: string, signal?: AbortSignal): Promise<string> {
    return this.#call('GET', `/files/${encodeURIComponent(id)}/content`, null, signal);
  }

  async cancelBatch(id: string, signal?: AbortSignal): Promise<ProviderBatch> {
    return readProviderBatch(JSON.parse(await this.#call('POST', `/batches/${encodeURIComponent(id)}/cancel`, null, signal)));
  }

  async #call(method: string, path: string, body: string | FormData | null, signal?: AbortSignal): Promise<string> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (typeof body === 'string') headers['content-type'] = 'application/json';
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      res = await this.#fetch(endpointUrl(this.#base, path), { method, headers, body, signal: combined });
      text = await res.text();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw classifyNetworkError(error, this.#apiKey);
    }
    if (!res.ok) throw classifyHttpError(res.status, text, res.headers, null, this.#apiKey);
    return text;
  }
}
