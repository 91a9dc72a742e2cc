import type { LaneMemory } from '../store/types.js';
import { Lane, type LaneSnapshot } from './lane.js';
import { LocalLaneBoard, type LaneBoard, type LearnedLimits } from './pace/board.js';
import { LEARNED_FROM_429S_KEPT_MS } from '../remembered-pace.js';
import type { PaceLimits } from './pace/window-pacer.js';

/** Makes the board of one lane: in process by default, in Redis when runs share limits. */
export interface LaneBoards {
  board(baseUrl: string, model: string): LaneBoard;
  close(): Promise<void>;
}

export const localBoards = (now: () => number): LaneBoards => ({
  board: () => new LocalLaneBoard(now),
  close: async () => {},
});

/** One claim of a round: at most `limit` jobs, leaving the jobs of `skipModels` pending. */
export interface ClaimShare {
  readonly limit: number;
  readonly skipModels: readonly string[];
}

/** The claims of one round (`Lanes.claimPlan`): each paced lane's, then the rest's. */
export interface ClaimPlan {
  readonly paced: readonly ClaimShare[];
  readonly rest: ClaimShare;
}

/** Jobs a lane may have sleeping before a retry, in multiples of its concurrency. */
export const BACKOFF_ROOM = 16;

/**
 * The lanes of one run, one per model (the base URL is the run's). Learned limits are read from the
 * store when a lane opens and written back when they change, so the next run starts at the right
 * pace instead of probing.
 */
export class Lanes {
  readonly #lanes = new Map<string, Lane>();
  readonly #remembered = new Map<string, LearnedLimits>();
  /** What was last written for each model, and when it was learned (the row's `at`). */
  readonly #saved = new Map<string, { key: string; at: number }>();

  constructor(
    readonly baseUrl: string,
    private readonly caps: PaceLimits,
    private readonly boards: LaneBoards,
    private readonly now: () => number,
    /** The provider enforces no limit (the offline mock): its lanes start at full concurrency (`Lane`). */
    private readonly unlimited = false,
  ) {}

  /** Load what earlier runs learned about this base URL's models. */
  async load(store: Pick<LaneMemory, 'laneLimits'>): Promise<void> {
    for (const row of await store.laneLimits()) {
      if (row.baseUrl !== this.baseUrl) continue;
      const { rpm, tpm, source, at } = row;
      this.#remembered.set(row.model, { rpm, tpm, source, at });
      this.#saved.set(row.model, { key: JSON.stringify([rpm, tpm, source]), at });
    }
  }

  get(model: string): Lane {
    let lane = this.#lanes.get(model);
    if (!lane) {
      lane = new Lane(model, this.caps, this.boards.board(this.baseUrl, model), this.now, { unlimited: this.unlimited });
      const remembered = this.#remembered.get(model);
      if (remembered) lane.restore(remembered);
      this.#lanes.set(model, lane);
    }
    return lane;
  }

  all(): Lane[] {
    return [...this.#lanes.values()];
  }

  snapshots(): LaneSnapshot[] {
    return this.all().map((l) => l.snapshot());
  }

  /**
   * Models whose lane should take no more jobs now: closed (`Lane.close`), full, paused with jobs already in hand, or
   * holding as many jobs as its pace needs waiting (`Lane.paceAhead`). Full
   * is `perLane` jobs not backing off: a job sleeping before its retry holds no slot, and while
   * failed tries wait their turn the others must keep the slots busy (with every job counted, a
   * flaky provider and long backoffs left the run sending nothing). Those sleeping are held to
   * BACKOFF_ROOM times `perLane`, so a provider failing often cannot draw the whole queue into hand.
   */
  saturated(perLane: number): string[] {
    return this.all()
      .filter(
        (l) =>
          l.closedBy !== null ||
          l.inHand - l.backingOff >= perLane ||
          l.backingOff >= perLane * BACKOFF_ROOM ||
          (l.pauseLeft() > 0 && l.inHand > 0) ||
          l.unsent() >= l.paceAhead(),
      )
      .map((l) => l.model);
  }

  /**
   * How a round of claims shares the room in hand among the lanes. A lane paced at a known limit
   * takes only what it lacks of its `paceAhead`, in a claim of its own (one claim of the whole room
   * took whichever model came first in claim order: a paced one held 16 s of work beside a model of
   * unknown limit). The rest of the room goes to lanes knowing no limit and to models with no lane
   * yet, in one claim skipping the paced lanes; when every lane is paced, to one job of a model with
   * no lane yet, which then says its own pace. Before any lane opens, one job: it opens its lane
   * with the limit an earlier run remembered, and the next round knows how many it wants. Full
   * lanes (`saturated`) take nothing.
   */
  claimPlan(perLane: number): ClaimPlan {
    const full = new Set(this.saturated(perLane));
    const lanes = this.all();
    const paced = lanes.filter((l) => l.paceAhead() !== Infinity);
    const others = (lane: Lane) => lanes.filter((l) => l !== lane).map((l) => l.model);
    return {
      paced: paced.filter((l) => !full.has(l.model)).map((l) => ({ limit: l.paceAhead() - l.unsent(), skipModels: others(l) })),
      rest: {
        limit: paced.length === lanes.length ? 1 : Number.POSITIVE_INFINITY,
        skipModels: lanes.filter((l) => full.has(l.model) || paced.includes(l)).map((l) => l.model),
      },
    };
  }

  /** The lanes that send nothing more in this run (`Lane.close`). */
  closed(): Lane[] {
    return this.all().filter((l) => l.closedBy !== null);
  }

  /** Jobs that hold no slot and count against no room in hand: those waiting on their lane's pace or pause, or backing off. */
  idle(): number {
    let n = 0;
    for (const l of this.#lanes.values()) n += l.waitingOnPace + l.backingOff;
    return n;
  }

  /** Pull shared state (Redis) of every lane. */
  async refresh(): Promise<void> {
    await Promise.all(this.all().map((l) => l.board.refresh().catch(() => {})));
  }

  /**
   * Write learned limits that changed since they were last saved. A pace 429s taught, met by 429s
   * again in this run, is written again unchanged once a tenth of the time it is kept has passed:
   * they keep it recent, and a run restarted after a long one finds it (`stillRemembered`). Limits
   * the headers said again are written again once a minute, so that `status` tells how recent the
   * provider's word is, not when it first said it.
   */
  async save(store: Pick<LaneMemory, 'saveLaneLimits'>): Promise<void> {
    for (const lane of this.all()) {
      const learned = lane.toRemember();
      if (!learned) continue;
      const rounded = { ...learned, rpm: round(learned.rpm), tpm: round(learned.tpm) };
      const key = JSON.stringify([rounded.rpm, rounded.tpm, rounded.source]);
      const saved = this.#saved.get(lane.model);
      const age = learned.at - (saved?.at ?? -Infinity);
      const stale =
        rounded.source === '429s' ? lane.rateLimited > 0 && age >= LEARNED_FROM_429S_KEPT_MS / 10 : age >= HEADERS_SAID_AGAIN_MS;
      if (saved?.key === key && !stale) continue;
      await store.saveLaneLimits({ baseUrl: this.baseUrl, model: lane.model, ...rounded });
      this.#saved.set(lane.model, { key, at: learned.at });
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((l) => l.board.close().catch(() => {})));
    await this.boards.close();
  }
}

/** How often limits the headers keep saying are written again (`Lanes.save`): the lane learns them again each minute. */
const HEADERS_SAID_AGAIN_MS = 60_000;

function round(n: number | null): number | null {
  return n === null ? null : Math.round(n * 100) / 100;
}
