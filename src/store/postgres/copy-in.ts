import pg from 'pg';

/**
 * `COPY ... FROM STDIN` through node-pg without a stream library: a Query whose answer to the
 * server's CopyInResponse is the whole text at once, then CopyDone. The rest (errors, the command
 * tag, ReadyForQuery) is node-pg's own handling of a simple query.
 */
class CopyIn extends pg.Query {
  readonly #data: Buffer;

  constructor(sql: string, data: Buffer, done: (error: Error | undefined) => void) {
    super(sql, (error) => done(error));
    this.#data = data;
  }

  // called by node-pg's Client when the server is ready for the rows (pg/lib/query.js has a refusing default)
  handleCopyInResponse(connection: CopyConnection): void {
    connection.sendCopyFromChunk(this.#data);
    connection.endCopyFrom();
  }
}

interface CopyConnection {
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
}

/** Send `data` (COPY's text format, one line per row) to `COPY table (columns) FROM STDIN`. */
export function copyIn(client: pg.ClientBase, sql: string, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    client.query(new CopyIn(sql, data, (error) => (error ? reject(error) : resolve())));
  });
}

const SPECIAL = /[\\\n\r\t]/;
const SPECIALS = /[\\\n\r\t]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A value as a field of COPY's text format: null as \N, and backslash, newline, carriage return
 * and tab escaped. Most values have none of them, and a test is cheaper than a replace. A lone
 * surrogate becomes U+FFFD when the line is encoded as UTF-8, as the JSON arrays of the INSERT path send it.
 */
export function copyField(value: string | null): string {
  if (value === null) return '\\N';
  return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c]!) : value;
}
