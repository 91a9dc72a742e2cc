import { knownError } from '../errors-known.js';
import type { Store } from './types.js';

/**
 * The store with failures of known cause (a read-only file, a full disk, a damaged database)
 * turned into LlmqErrors naming the database, wherever they surface: thrown by a method, in the
 * promise it returns, or while a row stream is read. Such failures can show up long after the
 * open (SQLite reads a damaged page, or first writes a read-only file, only when a query needs to).
 */
export function withKnownErrors<S extends Store>(store: S, shownLocation: string): S {
  // a lock held past the wait by a stopped run of this machine is named (SQLite: `stoppedRuns`)
  const lockHolder = store.stoppedRuns ? () => store.stoppedRuns?.() ?? null : undefined;
  const mapped = (error: unknown): unknown => knownError(error, { what: 'the database', path: shownLocation, lockHolder }) ?? error;
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          // Called on the store itself: its private fields are not reachable through the proxy.
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (error) {
          throw mapped(error);
        }
        if (result instanceof Promise)
          return result.catch((error: unknown) => {
            throw mapped(error);
          });
        if (isAsyncIterable(result)) return mapIteration(result, mapped);
        return result;
      };
    },
  });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

async function* mapIteration<T>(rows: AsyncIterable<T>, mapped: (error: unknown) => unknown): AsyncGenerator<T> {
  try {
    yield* rows;
  } catch (error) {
    throw mapped(error);
  }
}
