// Waiting helpers that give up when an AbortSignal fires.

/** Sleep until the deadline `deadline()` returns has passed (re-read after each sleep: it may move). */
export async function waitUntil(deadline: () => number, signal: AbortSignal): Promise<void> {
  for (let until = deadline(); until > Date.now(); until = deadline()) {
    await sleep(until - Date.now(), signal);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Race a promise against an abort signal. The promise keeps running; its result is ignored. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {}); // once abandoned, its rejection (e.g. "limiter stopped") is nobody's business
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
