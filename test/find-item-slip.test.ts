import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { slipFor } from '../src/report/find-item.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { row } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

const T0 = 1_750_000_000_000;
const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

async function queue(ids: readonly string[]): Promise<SqliteStore> {
  const store = new SqliteStore(join(tempDir(), 'q.db'));
  stores.push(store);
  await store.enqueue(
    ids.map((id, i) => row(id, `text ${i}`, { source: `notes/${id}` })),
    T0,
  );
  return store;
}

describe('slipFor: the item an id that names none likely means', () => {
  it("a file's name without its subfolder: the item in the subfolder, the first in input order of several", async () => {
    const store = await queue(['sub/n4.txt', 'other/n4.txt', 'a.txt']);
    expect(await slipFor(store, 'n4.txt')).toEqual({
      id: 'sub/n4.txt',
      source: 'notes/sub/n4.txt',
      why: 'Ids of files in subfolders name them',
      several: true,
    });
    expect((await slipFor(store, './n4.txt'))?.id).toBe('sub/n4.txt');
    expect(await slipFor(store, 'nothing.txt')).toBeNull();
  });

  it('a path typed with ./ is the item without it first, not one in a subfolder of the same name', async () => {
    const store = await queue(['sub/b.txt', 'b.txt', 'c.md']);
    expect(await slipFor(store, './b.txt')).toEqual({
      id: 'b.txt',
      source: 'notes/b.txt',
      why: 'Ids do not start with ./',
    });
    expect(await slipFor(store, '././b.txt')).toMatchObject({ id: 'b.txt' });
    // and without its extension: the extension tried on the id without ./
    expect(await slipFor(store, './c')).toMatchObject({ id: 'c.md', why: 'Ids of files keep their extension' });
    expect(await slipFor(store, './')).toBeNull();
  });

  it('does not scan for a subfolder item in a queue of over two million items (a scan of them all), nor for an empty id', async () => {
    const scanned: string[] = [];
    const huge = {
      item: async () => null,
      itemSeqSpan: async () => ({ first: 1, last: 3_000_000 }),
      itemsEndingIn: async (name: string) => {
        scanned.push(name);
        return [{ id: `sub/${name}`, source: `notes/sub/${name}` }];
      },
    };
    expect(await slipFor(huge, 'n4.txt')).toBeNull();
    expect(await slipFor({ ...huge, itemSeqSpan: async () => ({ first: 1, last: 1_000 }) }, 'n4.txt')).toMatchObject({ id: 'sub/n4.txt' });
    expect(await slipFor({ ...huge, itemSeqSpan: async () => ({ first: 1, last: 1_000 }) }, './')).toBeNull();
    expect(scanned).toEqual(['n4.txt']);
  });
});
