/**
 * The `campaignProgress` stream: the campaign with its stats now, then again on each campaign event
 * and at most every `everyMs` while it changes, until it completes or is cancelled. A plain
 * iterator (see graphql/live.ts): `return()` ends the bus subscription at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LiveNotice } from '../../platform/events/bus.ts';

export function progressStream<T>(notices: AsyncIterableIterator<LiveNotice>, load: () => Promise<T>, fingerprint: (v: T) => string, done: (v: T) => boolean, everyMs = 1000): AsyncIterableIterator<T> {
  let last: string | null = null;
  let finished = false;
  let waiting: Promise<unknown> | null = null;
  const abort = new AbortController();
  const stream: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => stream,
    next: async () => {
      for (;;) {
        if (finished) return { value: undefined, done: true };
        if (last !== null) {
          waiting ??= notices.next().finally(() => { waiting = null; });
          await Promise.race([waiting, sleep(everyMs, undefined, { signal: abort.signal }).catch(() => undefined)]);
          if (finished) return { value: undefined, done: true };
        }
        const value = await load();
        const key = fingerprint(value);
        if (done(value)) finished = true;
        if (key !== last) {
          last = key;
          return { value, done: false };
        }
      }
    },
    return: async () => {
      finished = true;
      abort.abort();
      await notices.return?.();
      return { value: undefined, done: true };
    },
  };
  return stream;
}
