import { UsageError } from '../errors.js';

/** When a run should raise an alert. Each is optional. */
export interface AlertThresholds {
  /** Jobs this run failed, at least. */
  readonly failed?: number;
  /** The oldest pending job in the queue has waited at least this long (ms). */
  readonly oldestMs?: number;
  /** Share of tries that errored over the last `windowMs`, at least (0..1). */
  readonly errorRate?: number;
  /** @default 300000 (5 minutes) */
  readonly windowMs?: number;
}

/** `90s`, `15m`, `2h`, `1h30m`, or a bare number of seconds. */
export function parseDuration(value: string, flag: string): number {
  const text = value.trim().toLowerCase();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) {
    throw new UsageError(`${flag} ${value}: expected a duration such as 90s, 15m, 2h or 1h30m.`);
  }
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
  return parts.reduce((ms, p) => ms + Number(p[1]) * unit[p[2] as keyof typeof unit], 0);
}

/** `5%` or `0.05`: a share from 0 (excluded) to 1. */
export function parseRate(value: string, flag: string): number {
  const text = value.trim();
  const n = text.endsWith('%') ? Number(text.slice(0, -1)) / 100 : Number(text);
  if (text === '' || !Number.isFinite(n) || n <= 0 || n > 1) {
    throw new UsageError(`${flag} ${value}: expected a share of tries such as 5% or 0.05 (above 0, at most 100%).`);
  }
  return n;
}
