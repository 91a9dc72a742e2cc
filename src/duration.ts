const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A duration as llmq's flags take it, with its unit (`90s`, `15m`, `2h`, `1h30m`, `500ms`, `2d`), in
 * ms; null when `text` is not one. A bare number is not: each flag says what its own means.
 */
export function durationWithUnitMs(text: string): number | null {
  const s = text.trim().toLowerCase();
  const parts = [...s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== s) return null;
  return parts.reduce((ms, p) => ms + Number(p[1]) * UNIT_MS[p[2] as keyof typeof UNIT_MS], 0);
}

/**
 * A duration as a flag takes it, in one word that `durationWithUnitMs` reads back (`5m`, `1h30m`,
 * `1m30s`, `45s`), to the second: for the values llmq prints beside a flag's name (`--max-outage 5m`),
 * which a user types back. `duration()` in report/format.ts reads better in a sentence ("5m 00s"),
 * but is two words.
 */
export function flagDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s === 0) return `${Math.max(0, Math.round(ms))}ms`;
  const parts: Array<[number, string]> = [
    [Math.floor(s / 3600), 'h'],
    [Math.floor((s % 3600) / 60), 'm'],
    [s % 60, 's'],
  ];
  return parts
    .filter(([n]) => n > 0)
    .map(([n, unit]) => `${n}${unit}`)
    .join('');
}
