/** mulberry32: small, fast, good enough to vary test input; a failing seed reproduces. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [0, n) and an element of a list, from one seeded sequence. */
export function seededPicks(seed: number): { rand(n: number): number; pick<T>(xs: readonly T[]): T } {
  const next = prng(seed);
  const rand = (n: number) => Math.floor(next() * n);
  return { rand, pick: (xs) => xs[rand(xs.length)]! };
}
