/**
 * How deep a JSON document may nest. JSON.parse itself copes with any depth, but what comes after
 * does not: key sorting for the job hash and JSON.stringify (storing meta, export, show) recurse
 * once per level and overflow the stack somewhere past 2,000 levels, depending on how deep the
 * caller already is. 256 leaves that code a wide margin and is far beyond any real document (JSON
 * libraries commonly stop at 128 to 1,000).
 */
export const MAX_JSON_DEPTH = 256;

export const reasonTooDeep = (max = MAX_JSON_DEPTH) => `nested deeper than ${max} levels (llmq's limit for JSON documents)`;

/**
 * Whether a parsed JSON value nests objects/arrays more than `max` levels deep (a top-level
 * object is level 1). Walks with an explicit stack instead of recursing, because the values it
 * guards are exactly the ones recursion cannot handle.
 */
export function nestsDeeperThan(value: unknown, max = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== 'object') return false;
  const stack: Array<{ node: object; depth: number }> = [{ node: value, depth: 1 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.depth > max) return true;
    const children = Array.isArray(top.node) ? top.node : Object.values(top.node);
    for (const child of children) {
      if (child !== null && typeof child === 'object') stack.push({ node: child, depth: top.depth + 1 });
    }
  }
  return false;
}
