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

/**
 * The one field of `record` that `name` looks like a slip of the keyboard for (another case, a
 * letter left out, added, changed or two swapped), or undefined when none or several are that close:
 * a guess offered only when it is the plain one.
 */
export function likelyMeant(name: string, record: Readonly<Record<string, unknown>>): string | undefined {
  const lower = name.toLowerCase();
  const others = Object.keys(record).filter((k) => k !== name);
  const otherCase = others.filter((k) => k.toLowerCase() === lower);
  // a short name is one slip from too many others for a guess to mean anything
  const near = otherCase.length > 0 || name.length < 3 ? otherCase : others.filter((k) => oneSlipApart(lower, k.toLowerCase()));
  return near.length === 1 ? near[0] : undefined;
}

/** Whether `a` becomes `b` by one insertion, deletion, substitution, or swap of neighbours. */
function oneSlipApart(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  let j = 0;
  while (j < a.length - i && j < b.length - i && a[a.length - 1 - j] === b[b.length - 1 - j]) j++;
  // what differs between the common start and the common end
  const restA = a.length - i - j;
  const restB = b.length - i - j;
  if (restA <= 1 && restB <= 1) return true;
  return restA === 2 && restB === 2 && a[i] === b[i + 1] && a[i + 1] === b[i];
}
