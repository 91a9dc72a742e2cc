/** `cost_usd`, then `finish_reason`, came last, after the others had shipped: columns read by position keep their place. */
export const CSV_COLUMNS = Object.freeze([
  'id',
  'key',
  'state',
  'model',
  'attempts',
  'prompt_tokens',
  'completion_tokens',
  'latency_ms',
  'source',
  'output',
  'error',
  'meta',
  'cost_usd',
  'finish_reason',
] as const);

/**
 * Whether a text is a CSV export of llmq (its header, of this version or an earlier one with fewer
 * trailing columns): a folder enqueued again with its export in it would send the answers as documents.
 */
export function isCsvExport(text: string): boolean {
  return text.startsWith(`${CSV_COLUMNS.slice(0, 8).join(',')},`);
}
