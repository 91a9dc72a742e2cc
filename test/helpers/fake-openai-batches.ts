/**
 * The Batch API of the fake OpenAI server: `POST /v1/files` (multipart, purpose batch),
 * `POST /v1/batches`, `GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`,
 * `GET /v1/files/{id}/content`. Reached through `fake.batches` (see fake-openai.ts).
 *
 * ```ts
 * fake.batches.configure({ completeAfterMs: 100 });                 // a batch ends 100 ms after creation
 * fake.batches.fate = (b) => (b.seq === 1 ? 'expired' : 'completed'); // expired: only the first half answered
 * fake.batches.line = (key) => (key === bad ? 'error' : 'ok');        // per line: ok | error | server | missing | bad-body | cut-off
 * fake.batches.script('create', reply.serverError(503));              // the next create answers 503
 * fake.batches.script('create', reply.reset());                       // the next create happens, its answer is lost
 * fake.batches.onCall = (call) => { if (call.endpoint === 'create') child.kill('SIGKILL'); };
 * fake.sentCount(jobKey)                                              // counts a job in every batch created, too
 * ```
 *
 * Batches and files are shown only to the key they were made with (the request's Authorization), as
 * OpenAI shows each project its own: another key gets 404 for them and does not list them.
 *
 * Fates: `completed`, `expired` (the first half of the lines answered, the rest in the error file as
 * `batch_expired`), `cancelled` (ends when cancelled, nothing answered: each line `batch_cancelled`), `quota` (fails at once with token_limit_exceeded),
 * `in_progress` (never ends). Answers are the fake's usual ones: `answerFor(body)`, tokenizer usage.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { send } from './fake-openai-http.js';
import { completionBody, errorBody, sha256, type FakeReply, type FakeRequest } from './fake-openai-replies.js';

export type BatchEndpoint = 'upload' | 'create' | 'get' | 'list' | 'content' | 'cancel';
/** `mixed_models`: refused at validation, as OpenAI refuses an input file whose lines name more than one model. */
/** The error of a line its batch never ran, by how the batch ended: OpenAI's codes. */
const NOT_RUN = {
  expired: { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' },
  cancelled: { code: 'batch_cancelled', message: 'This request was not executed because the batch was cancelled.' },
} as const;

export type BatchFate = 'completed' | 'expired' | 'cancelled' | 'quota' | 'in_progress' | 'mixed_models';
export type LineFate = 'ok' | 'error' | 'server' | 'missing' | 'bad-body' | 'cut-off';

export interface FakeBatch {
  readonly id: string;
  /** 1-based order of creation. */
  readonly seq: number;
  readonly inputFileId: string;
  readonly metadata: Record<string, string>;
  /** The Authorization it was made with ('' for none): only that key sees it. */
  readonly key: string;
  readonly createdAt: number;
  readonly lines: ReadonlyArray<{ custom_id: string; body: any }>;
  readonly fate: BatchFate;
  status: string;
  outputFileId: string | null;
  errorFileId: string | null;
}

export interface BatchCall {
  readonly endpoint: BatchEndpoint;
  readonly method: string;
  readonly path: string;
  readonly at: number;
}

export class FakeBatchApi {
  readonly files = new Map<string, string>();
  readonly batches = new Map<string, FakeBatch>();
  /** Every Batch API call, in order. */
  readonly calls: BatchCall[] = [];
  /** How each new batch ends. */
  fate: (batch: { seq: number; lines: number }) => BatchFate = () => 'completed';
  /** How each line of an ending batch is answered. */
  line: (customId: string, body: any) => LineFate = () => 'ok';
  /** Called on every call, before it is answered. */
  onCall: ((call: BatchCall) => void) | null = null;
  completeAfterMs = 100;
  readonly #queue = new Map<BatchEndpoint, FakeReply[]>();
  /** The Authorization each file was uploaded with. */
  readonly #fileKeys = new Map<string, string>();
  readonly #countSent: (key: string) => void;
  #seq = 0;

  constructor(countSent: (key: string) => void) {
    this.#countSent = countSent;
  }

  configure(o: { completeAfterMs?: number }): void {
    if (o.completeAfterMs !== undefined) this.completeAfterMs = o.completeAfterMs;
  }

  /** Answer the next calls to `endpoint` with these replies (`raw`/`error`, or `reset`: done, answer lost). */
  script(endpoint: BatchEndpoint, ...replies: FakeReply[]): void {
    this.#queue.set(endpoint, [...(this.#queue.get(endpoint) ?? []), ...replies]);
  }

  count(endpoint: BatchEndpoint): number {
    return this.calls.filter((c) => c.endpoint === endpoint).length;
  }

  /** The endpoint a path belongs to, or null when it is not the Batch API's. */
  static endpointOf(method: string, path: string): BatchEndpoint | null {
    const p = path.split('?')[0]!;
    if (method === 'POST' && p === '/v1/files') return 'upload';
    if (method === 'POST' && p === '/v1/batches') return 'create';
    if (method === 'GET' && p === '/v1/batches') return 'list';
    if (method === 'GET' && /^\/v1\/batches\/[^/]+$/.test(p)) return 'get';
    if (method === 'POST' && /^\/v1\/batches\/[^/]+\/cancel$/.test(p)) return 'cancel';
    if (method === 'GET' && /^\/v1\/files\/[^/]+\/content$/.test(p)) return 'content';
    return null;
  }

  handle(endpoint: BatchEndpoint, req: IncomingMessage, res: ServerResponse, body: string): void {
    const call: BatchCall = { endpoint, method: req.method ?? 'GET', path: req.url ?? '/', at: Date.now() };
    this.calls.push(call);
    this.onCall?.(call);
    const scripted = this.#queue.get(endpoint)?.shift();
    if (scripted?.kind === 'raw') return send(res, scripted.status, scripted.body, scripted.headers);
    if (scripted?.kind === 'reset' && endpoint !== 'create') {
      req.socket.destroy();
      return;
    }
    const path = call.path.split('?')[0]!;
    const id = decodeURIComponent(path.split('/')[3] ?? '');
    const key = req.headers.authorization ?? '';
    const seen = (b: FakeBatch | undefined) => (b?.key === key ? b : undefined);
    switch (endpoint) {
      case 'upload':
        return this.#upload(req, res, body, key);
      case 'create': {
        const answer = this.#create(body, key);
        if (scripted?.kind === 'reset') {
          req.socket.destroy();
          return;
        }
        return send(res, answer.status, answer.body);
      }
      case 'get': {
        const b = seen(this.batches.get(id));
        return b
          ? send(res, 200, this.#view(this.#advance(b)))
          : send(res, 404, errorBody(`No batch with id '${id}'`, 'invalid_request_error'));
      }
      case 'list': {
        const q = new URL(call.path, 'http://x').searchParams;
        const all = [...this.batches.values()].filter((b) => b.key === key).reverse();
        const after = q.get('after');
        const from = after ? all.findIndex((b) => b.id === after) + 1 : 0;
        const page = all.slice(from, from + Number(q.get('limit') ?? 20));
        return send(res, 200, {
          object: 'list',
          data: page.map((b) => this.#view(this.#advance(b))),
          first_id: page[0]?.id ?? null,
          last_id: page.at(-1)?.id ?? null,
          has_more: from + page.length < all.length,
        });
      }
      case 'cancel': {
        const b = seen(this.batches.get(id));
        if (!b) return send(res, 404, errorBody(`No batch with id '${id}'`, 'invalid_request_error'));
        if (!['completed', 'expired', 'cancelled', 'failed'].includes(b.status)) this.#end(b, 'cancelled', 0);
        return send(res, 200, this.#view(b));
      }
      case 'content': {
        const fileId = decodeURIComponent(path.split('/')[3] ?? '');
        const content = this.#fileKeys.get(fileId) === key ? this.files.get(fileId) : undefined;
        return content === undefined
          ? send(res, 404, errorBody(`No file with id '${fileId}'`, 'invalid_request_error'))
          : send(res, 200, content, { 'content-type': 'application/octet-stream' });
      }
    }
  }

  #upload(req: IncomingMessage, res: ServerResponse, body: string, key: string): void {
    const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(req.headers['content-type'] ?? '');
    if (!boundary) return send(res, 400, errorBody('expected multipart/form-data', 'invalid_request_error'));
    const parts = new Map<string, string>();
    for (const part of body.split(`--${boundary[1] ?? boundary[2]}`)) {
      const split = part.indexOf('\r\n\r\n');
      const name = /name="([^"]+)"/.exec(part.slice(0, split));
      if (split < 0 || !name) continue;
      parts.set(name[1]!, part.slice(split + 4).replace(/\r\n$/, ''));
    }
    if (parts.get('purpose') !== 'batch' || !parts.has('file')) {
      return send(res, 400, errorBody("expected fields 'purpose' = batch and 'file'", 'invalid_request_error'));
    }
    const id = `file-fake${++this.#seq}`;
    this.files.set(id, parts.get('file')!);
    this.#fileKeys.set(id, key);
    send(res, 200, {
      id,
      object: 'file',
      bytes: Buffer.byteLength(parts.get('file')!),
      created_at: Math.floor(Date.now() / 1000),
      filename: 'input.jsonl',
      purpose: 'batch',
    });
  }

  #create(body: string, key: string): { status: number; body: object } {
    let json: any;
    try {
      json = JSON.parse(body);
    } catch {
      return { status: 400, body: errorBody('body is not JSON', 'invalid_request_error') };
    }
    const content = this.#fileKeys.get(json?.input_file_id) === key ? this.files.get(json?.input_file_id) : undefined;
    if (content === undefined) return { status: 400, body: errorBody(`No file with id '${json?.input_file_id}'`, 'invalid_request_error') };
    if (json.endpoint !== '/v1/chat/completions' || json.completion_window !== '24h') {
      return { status: 400, body: errorBody('endpoint must be /v1/chat/completions and completion_window 24h', 'invalid_request_error') };
    }
    const lines = content
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l));
    const seq = this.batches.size + 1;
    const b: FakeBatch = {
      id: `batch_fake${seq}`,
      seq,
      inputFileId: json.input_file_id,
      metadata: json.metadata ?? {},
      key,
      createdAt: Date.now(),
      lines,
      fate: new Set(lines.map((l) => l.body?.model)).size > 1 ? 'mixed_models' : this.fate({ seq, lines: lines.length }),
      status: 'validating',
      outputFileId: null,
      errorFileId: null,
    };
    this.batches.set(b.id, b);
    if (b.fate !== 'quota' && b.fate !== 'mixed_models') for (const l of lines) this.#countSent(l.custom_id);
    return { status: 200, body: this.#view(this.#advance(b)) };
  }

  /** Move a batch along its fate as time passes. */
  #advance(b: FakeBatch): FakeBatch {
    if ((b.fate === 'quota' || b.fate === 'mixed_models') && b.status === 'validating') {
      b.status = 'failed';
      return b;
    }
    if (b.status === 'validating') b.status = 'in_progress';
    if (b.status === 'in_progress' && Date.now() - b.createdAt >= this.completeAfterMs) {
      if (b.fate === 'completed') this.#end(b, 'completed', b.lines.length);
      else if (b.fate === 'expired') this.#end(b, 'expired', Math.floor(b.lines.length / 2));
    }
    return b;
  }

  /** End a batch with its first `answered` lines answered. */
  #end(b: FakeBatch, status: string, answered: number): void {
    const out: string[] = [];
    const err: string[] = [];
    for (const l of b.lines.slice(0, answered)) {
      const fate = this.line(l.custom_id, l.body);
      const text = JSON.stringify(l.body);
      const req: FakeRequest = {
        index: 0,
        method: 'POST',
        path: '/v1/chat/completions',
        headers: {},
        body: text,
        json: l.body,
        key: sha256(text),
        attempt: 1,
        receivedAt: Date.now(),
        answered: 200,
      };
      const id = `batch_req_${++this.#seq}`;
      if (fate === 'ok')
        out.push(
          JSON.stringify({
            id,
            custom_id: l.custom_id,
            response: { status_code: 200, request_id: id, body: completionBody(req, {}) },
            error: null,
          }),
        );
      else if (fate === 'cut-off') {
        // cut off at max_tokens: its whole limit used (700 when the request sets none)
        const limit = Number(l.body.max_tokens ?? 700);
        const body = completionBody(req, { content: 'cut sh', usage: { prompt_tokens: 10, completion_tokens: limit } }) as {
          choices: Array<{ finish_reason: string }>;
        };
        body.choices[0]!.finish_reason = 'length';
        out.push(JSON.stringify({ id, custom_id: l.custom_id, response: { status_code: 200, request_id: id, body }, error: null }));
      } else if (fate === 'bad-body')
        // a 200 whose body is no completion (no choices)
        out.push(
          JSON.stringify({
            id,
            custom_id: l.custom_id,
            response: { status_code: 200, request_id: id, body: { object: 'chat.completion' } },
            error: null,
          }),
        );
      else if (fate === 'server')
        out.push(
          JSON.stringify({
            id,
            custom_id: l.custom_id,
            response: { status_code: 500, request_id: id, body: errorBody('The server had an error', 'server_error') },
            error: null,
          }),
        );
      else if (fate === 'error')
        err.push(
          JSON.stringify({
            id,
            custom_id: l.custom_id,
            response: {
              status_code: 400,
              request_id: id,
              body: errorBody("Invalid value for 'temperature'", 'invalid_request_error', 'invalid_value'),
            },
            error: null,
          }),
        );
    }
    // the lines an expired or cancelled batch never ran, in its error file with no response, as OpenAI writes them
    const notRun = status === 'expired' ? NOT_RUN.expired : status === 'cancelled' ? NOT_RUN.cancelled : null;
    if (notRun) {
      for (const l of b.lines.slice(answered)) {
        err.push(JSON.stringify({ id: `batch_req_${++this.#seq}`, custom_id: l.custom_id, response: null, error: notRun }));
      }
    }
    if (out.length) {
      b.outputFileId = `file-out${++this.#seq}`;
      this.files.set(b.outputFileId, out.join('\n') + '\n');
      this.#fileKeys.set(b.outputFileId, b.key);
    }
    if (err.length) {
      b.errorFileId = `file-err${++this.#seq}`;
      this.files.set(b.errorFileId, err.join('\n') + '\n');
      this.#fileKeys.set(b.errorFileId, b.key);
    }
    b.status = status;
  }

  #view(b: FakeBatch): object {
    // while it runs, answered in proportion to the time it has had (of completeAfterMs)
    const running = b.status === 'in_progress' ? Math.floor((b.lines.length * (Date.now() - b.createdAt)) / this.completeAfterMs) : 0;
    const done = b.outputFileId ? this.files.get(b.outputFileId)!.split('\n').filter(Boolean).length : Math.min(running, b.lines.length);
    const failed = b.errorFileId ? this.files.get(b.errorFileId)!.split('\n').filter(Boolean).length : 0;
    return {
      id: b.id,
      object: 'batch',
      endpoint: '/v1/chat/completions',
      input_file_id: b.inputFileId,
      completion_window: '24h',
      status: b.status,
      output_file_id: b.outputFileId,
      error_file_id: b.errorFileId,
      created_at: Math.floor(b.createdAt / 1000),
      metadata: b.metadata,
      request_counts: { total: b.lines.length, completed: done, failed },
      errors:
        b.fate === 'mixed_models'
          ? {
              object: 'list',
              data: [
                {
                  code: 'mismatched_model',
                  message: 'The provided model does not match the model of other requests in the batch file.',
                  param: 'body.model',
                  line: 2,
                },
              ],
            }
          : b.fate === 'quota'
            ? {
                object: 'list',
                data: [
                  {
                    code: 'token_limit_exceeded',
                    message:
                      'Enqueued token limit reached for gpt-4o-mini in organization org-fake. Limit: 90,000 enqueued tokens. Please try again once some in_progress batches have been completed.',
                    param: null,
                    line: null,
                  },
                ],
              }
            : null,
    };
  }
}
