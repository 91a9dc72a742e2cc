/**
 * PostgreSQL's `text` holds every character but U+0000: a value with one is refused ("invalid byte
 * sequence for encoding UTF8: 0x00"), and with it the whole statement, a batch of answers included.
 * Text that comes from outside (an answer, a provider's error message) has it replaced by U+FFFD,
 * the replacement character; the stored response body keeps it, as JSON writes it (`\u0000`).
 */
export function pgText<T extends string | null | undefined>(text: T): T {
  return (typeof text === 'string' && text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text) as T;
}
