import { describe, expect, it } from 'vitest';
import { RequestAbort, toAbortSignal } from '../src/provider/request-signal.js';

describe('RequestAbort: one request abort, as AbortSignal behaves', () => {
  it('runs each listener once, in the order added, functions and handleEvent objects alike', () => {
    const signal = new RequestAbort();
    const calls: string[] = [];
    signal.addEventListener('abort', () => calls.push(`first saw ${String(signal.reason)}`));
    signal.addEventListener('abort', { handleEvent: () => calls.push('second') });
    signal.addEventListener('abort', () => calls.push('third'));
    signal.abort('cut');
    signal.abort('again');
    expect(calls).toEqual(['first saw cut', 'second', 'third']);
    expect(signal).toMatchObject({ aborted: true, reason: 'cut' });
  });

  it('forgets a removed listener, alone or among others, and never runs one added after the abort', () => {
    const calls: string[] = [];
    const a = () => calls.push('a');
    const b = { handleEvent: () => calls.push('b') };
    const alone = new RequestAbort();
    alone.addEventListener('abort', a);
    alone.removeEventListener('abort', a);
    alone.abort('x');
    const among = new RequestAbort();
    among.addEventListener('abort', a);
    among.addEventListener('abort', b);
    among.removeEventListener('abort', a);
    among.abort('y');
    among.addEventListener('abort', a);
    expect(calls).toEqual(['b']);
  });

  it('throws its reason from throwIfAborted once aborted, and not before', () => {
    const signal = new RequestAbort();
    expect(() => signal.throwIfAborted()).not.toThrow();
    const reason = new Error('stop requested');
    signal.abort(reason);
    expect(() => signal.throwIfAborted()).toThrow(reason);
  });

  it('bridges to a real AbortSignal that aborts with the same reason, before or after', () => {
    const reason = new Error('cut');
    const later = new RequestAbort();
    const bridged = toAbortSignal(later);
    expect(bridged.aborted).toBe(false);
    later.abort(reason);
    expect(bridged.aborted).toBe(true);
    expect(bridged.reason).toBe(reason);
    const before = new RequestAbort();
    before.abort(reason);
    expect(toAbortSignal(before).reason).toBe(reason);
    const real = new AbortController().signal;
    expect(toAbortSignal(real)).toBe(real);
  });
});
