/** llmq as a library: the store, ingest, providers and the scheduler, without the CLI. */
export * from './errors.js';
export * from './request.js';
export * from './store/types.js';
export { SqliteStore } from './store/sqlite/store.js';
export { PostgresStore } from './store/postgres/store.js';
export { copyStore, type CopyOptions, type CopyResult, type CopyTable } from './store/copy.js';
export { openStore, resolveDbLocation, isPostgresUrl, redactLocation } from './store/open-store.js';
export * from './provider/types.js';
export * from './scheduler/events.js';
