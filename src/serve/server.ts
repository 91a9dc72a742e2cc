import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { redactSecret } from '../provider/redact.js';
import type { PriceTable } from '../pricing/price-table.js';
import type { BatchLedger, JobQueue, QueueReader } from '../store/types.js';
import { findItem, isKeyPrefix, itemJson } from '../report/find-item.js';
import { LlmqError } from '../errors.js';
import { FAILED_ITEMS_LIMIT, retryFailedJobs } from './api.js';
import { StatusFeed, type FeedMessage } from './feed.js';
import { OwnAddress, refuseForeign, refuseWithoutToken, type Refusal } from './guard.js';
import { StaticFiles } from './static-files.js';

export interface DashboardOptions {
  /** The dashboard reads, and requeues failed jobs when asked to. */
  readonly store: QueueReader & Pick<JobQueue, 'retryFailed'> & Pick<BatchLedger, 'batches'>;
  readonly prices: PriceTable;
  /** The database as shown (no password). */
  readonly db: string;
  readonly host: string;
  /** More names the dashboard answers to (the Host header), besides its address (`OwnAddress`). */
  readonly allowHosts?: readonly string[];
  /** 0 picks a free port. */
  readonly port: number;
  /** Serve no actions at all. */
  readonly readOnly: boolean;
  /** What actions must carry in the token header. */
  readonly token: string;
  /** How often the store's status is polled for live updates. @default 2000 */
  readonly pollMs?: number;
  /** Secrets to mask in anything served, besides URL passwords (the API key, if set). */
  readonly secrets?: readonly string[];
  /** Throws when the queue opened is not the one at its place any more (`queueFileWatch`). */
  readonly stillThere?: () => void;
}

export interface Dashboard {
  readonly url: string;
  readonly feed: StatusFeed;
  close(): Promise<void>;
}

/** The most a request body may be: actions take a small JSON object. */
const MAX_BODY = 64 * 1024;
/** SSE comment lines keep proxies and idle timeouts from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** Start the dashboard: the page, its live feed, and (unless read-only) the retry action. */
export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  const feed = new StatusFeed({ store: o.store, prices: o.prices, db: o.db, everyMs: o.pollMs ?? 2000, stillThere: o.stillThere });
  const files = new StaticFiles();
  const streams = new Set<ServerResponse>();
  const json = (res: ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(redact(JSON.stringify(value), o.secrets));
  };
  const refuse = (res: ServerResponse, r: NonNullable<Refusal>) => json(res, r.status, { error: r.message });
  const own = new OwnAddress(o.host, { allowHosts: o.allowHosts });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refusal = refuseForeign(req, own);
    if (refusal) return refuse(res, refusal);
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const route = `${req.method} ${url.pathname}`;
    if (req.method === 'GET' && files.has(url.pathname)) {
      const f = await files.get(url.pathname);
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': f.type, 'content-length': f.body.length, 'cache-control': 'no-cache' });
      res.end(f.body);
      return;
    }
    switch (route) {
      case 'GET /api/config':
        return json(res, 200, { readOnly: o.readOnly, db: o.db, pollMs: o.pollMs ?? 2000 });
      case 'GET /events':
        return openStream(req, res);
      // the report the page shows, read now (the feed polls only while a page listens), for a script that
      // would rather not read a stream: as `status --json`
      case 'GET /api/status': {
        const report = await feed.report(true);
        return report
          ? json(res, 200, report)
          : json(res, 503, { error: `the queue cannot be read now: ${feed.lastError ?? 'llmq status says why'}` });
      }
      case 'GET /api/item': {
        // what `llmq show` finds: the item with this id, or the item of the job whose key starts with it
        const id = url.searchParams.get('id');
        // without one the answer was "no item with id ", which reads as a lookup that found nothing
        if (id === null || id === '') return json(res, 400, { error: 'name the item: /api/item?id=ID (an item id, or a job key prefix)' });
        let found: Awaited<ReturnType<typeof findItem>>;
        try {
          found = await findItem(o.store, id);
        } catch (error) {
          if (error instanceof LlmqError) return json(res, 404, { error: error.message });
          throw error;
        }
        return found
          ? json(res, 200, itemJson(found))
          : json(res, 404, { error: `no item with id ${id}${isKeyPrefix(id) ? ', nor a job whose key starts with it' : ''}` });
      }
      case 'GET /api/failed-items': {
        const error = url.searchParams.get('error');
        // without a reason the answer would be an empty list, which reads as "no such failures"
        if (error === null) return json(res, 400, { error: 'name the failure reason: /api/failed-items?error=REASON' });
        return json(res, 200, { items: await o.store.failedItems(error, FAILED_ITEMS_LIMIT) });
      }
      case 'POST /api/retry-failed': {
        if (o.readOnly) return json(res, 403, { error: 'this dashboard is read-only (llmq serve --read-only)' });
        const noToken = refuseWithoutToken(req, o.token);
        if (noToken) return refuse(res, noToken);
        const body = await readJson(req);
        // anything but {} (every failed job) or {"error": "<a reason>"} is refused: read loosely, a
        // misspelt field or a number put every failed job back, to be sent and paid for again
        const fields = body === undefined ? [] : Object.keys(body);
        if (body === undefined || fields.some((f) => f !== 'error') || (fields.length === 1 && typeof body.error !== 'string')) {
          return json(res, 400, {
            error: 'expected {} (every failed job) or {"error": "<the failure reason, as listed>"}',
          });
        }
        const error = body.error as string | undefined;
        const retried = await retryFailedJobs(o.store, error, Date.now());
        await feed.report(true);
        return json(res, 200, retried);
      }
      default:
        return json(res, 404, { error: `nothing at ${route}` });
    }
  };

  const openStream = async (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    streams.add(res);
    const send = (m: FeedMessage) => res.write(`event: ${m.type}\ndata: ${redact(JSON.stringify(m), o.secrets)}\n\n`);
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
    let unsubscribe: (() => void) | null = null;
    res.on('close', () => {
      clearInterval(keepalive);
      streams.delete(res);
      unsubscribe?.();
    });
    unsubscribe = await feed.subscribe(send);
    if (res.destroyed) unsubscribe();
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) return void res.destroy();
      json(res, 500, { error: error instanceof Error ? error.message : String(error) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host.includes(':') ? `[${o.host}]` : o.host;
  return {
    url: `http://${shownHost}:${port}/`,
    feed,
    close: async () => {
      feed.close();
      for (const s of streams) s.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // A browser keeps sockets open (keep-alive, preconnects) that would hold close() for minutes.
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Masks URL passwords, anything shaped like an API key, and the given secrets. */
function redact(text: string, secrets: readonly string[] = []): string {
  return secrets.reduce((t, s) => redactSecret(t, s), redactSecret(text, undefined));
}

/** The request's JSON object body, or undefined when it is not one (or too big). */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  // no body is not {}: an action that puts every failed job back (to be paid for again) is asked for
  // in words, never by an empty POST
  if (text === '') return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
