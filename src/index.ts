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
export { enqueue, type EnqueueOptions, type EnqueueSummary } from './ingest/enqueue.js';
export { createProvider, resolveBaseUrl, resolveApiKey, type CreateProviderOptions } from './provider/create.js';
export { OpenAIProvider, type OpenAIProviderOptions } from './provider/openai.js';
export { MockProvider, type MockProviderOptions } from './provider/mock.js';
export { estimatePromptTokens, estimateRequestTokens } from './provider/tokens.js';
export { runQueue, type RunDeps, type RunOptions } from './scheduler/run-queue.js';
export { LocalRateLimiter, type RateLimiter, type RateLimitOptions } from './scheduler/limiter.js';
export { RedisRateLimiter, type RedisLimiterOptions } from './scheduler/redis-limiter.js';
export { OutageBreaker, type OutageOptions } from './scheduler/outage.js';
