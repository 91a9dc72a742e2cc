import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../src');

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/**
 * The relative modules a file loads when it runs: static imports and re-exports, and `import()`.
 * Type-only imports are erased by the compiler, so they load nothing.
 */
function loads(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\s+(type\s+)?([^;]*?)\s+from\s+'(\.[^']+)'/gm)) {
    const names = m[2]!.trim();
    const typeOnly =
      m[1] !== undefined ||
      (/^\{[^}]*\}$/.test(names) &&
        names
          .slice(1, -1)
          .split(',')
          .every((n) => /^\s*(type\s|$)/.test(n)));
    if (!typeOnly) specs.push(m[3]!);
  }
  for (const m of text.matchAll(/import\('(\.[^']+)'\)/g)) specs.push(m[1]!);
  return specs.map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

/** The strongly connected groups of more than one module (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(relative(SRC, w));
    } while (w !== v);
    if (group.length > 1) found.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('module structure', () => {
  it('no module of src loads itself back through its imports (static or dynamic)', () => {
    const graph = new Map(sources(SRC).map((f) => [f, loads(f)]));
    expect(cycles(graph)).toEqual([]);
  });
});
