/**
 * A record's field names for a message that names one it lacks (`"id", "subject", ...`, the first
 * five), so that the fix needs no look into the file.
 */
export function fieldList(record: Readonly<Record<string, unknown>>): string {
  const names = Object.keys(record);
  const listed = names
    .slice(0, 5)
    .map((n) => JSON.stringify(n))
    .join(', ');
  return `${listed}${names.length > 5 ? ', ...' : ''}`;
}
