import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/store/group-commit.js';
import { keysetPages } from '../src/store/pages.js';

describe('GroupCommit', () => {
  it('commits the writes of one event-loop turn together, in arrival order, each caller getting its own result', async () => {
    const commits: number[][] = [];
    const group = new GroupCommit<number, number>((batch) => {
      commits.push([...batch]);
      return batch.map((n) => n * 10);
    });
    const results = await Promise.all([group.add(1), group.add(2), group.add(3)]);
    expect(results).toEqual([10, 20, 30]);
    expect(commits).toEqual([[1, 2, 3]]);
    expect(await group.add(4)).toBe(40);
    expect(commits).toEqual([[1, 2, 3], [4]]);
  });

  it('splits a turn into commits of at most maxBatch, and a failed commit rejects only its own writes', async () => {
    const commits: number[][] = [];
    const group = new GroupCommit<number, string>(async (batch) => {
      commits.push([...batch]);
      if (batch.includes(3)) throw new Error('disk full');
      return batch.map(String);
    }, 2);
    const settled = await Promise.allSettled([1, 2, 3, 4, 5].map((n) => group.add(n)));
    expect(commits).toEqual([[1, 2], [3, 4], [5]]);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([
      '1',
      '2',
      'disk full',
      'disk full',
      '5',
    ]);
  });

  it('a commit that throws synchronously rejects every write of it', async () => {
    const group = new GroupCommit<number, boolean>(() => {
      throw new Error('database is closed');
    });
    await expect(Promise.all([group.add(1), group.add(2)])).rejects.toThrow('database is closed');
  });

  it('drain commits what is queued at once and waits for commits still in flight (close)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const committed: number[] = [];
    const group = new GroupCommit<number, boolean>(async (batch) => {
      await gate;
      committed.push(...batch);
      return batch.map(() => true);
    });
    const write = group.add(7);
    let drained = false;
    const draining = group.drain().then(() => {
      drained = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    release();
    await draining;
    expect(committed).toEqual([7]);
    expect(await write).toBe(true);
  });
});

describe('keysetPages', () => {
  it('reads page after page from the last key, and stops at the first short page', async () => {
    const rows = Array.from({ length: 7 }, (_, i) => ({ seq: i + 1 }));
    const asked: unknown[] = [];
    const out: number[] = [];
    const pages = keysetPages(
      (after, size) => {
        asked.push(after);
        return rows.filter((r) => r.seq > (after as number)).slice(0, size);
      },
      'seq',
      3,
    );
    for await (const r of pages) out.push(r.seq);
    expect(out).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(asked).toEqual([0, 3, 6]);
  });
});
