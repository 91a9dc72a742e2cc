/** The progress display of `llmq run`: listeners of the scheduler's events. */
export * from './attach.js';
