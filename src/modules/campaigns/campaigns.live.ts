/**
 * The `campaignProgress` stream: the campaign with its stats now, then again on each campaign event
 * and at most every `everyMs` while it changes, until it completes or is cancelled. On
 * `liveIterator`: `return()` ends the bus subscription at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LiveNotice } from '../../platform/events/bus.ts';
import { END, liveIterator } from '../../platform/events/liveIterator.ts';

export function progressStream<T>(notices: AsyncIterableIterator<LiveNotice>, load: () => Promise<T>, fingerprint: (v: T) => string, done: (v: T) => boolean, everyMs = 1000): AsyncIterableIterator<T> {
  let last: string | null = null;
  let finished = false;
  let waiting: Promise<unknown> | null = null;
  const abort = new AbortController();
  return liveIterator(notices, async () => {
    for (;;) {
      if (finished) return END;
      if (last !== null) {
        waiting ??= notices.next().finally(() => { waiting = null; });
        await Promise.race([waiting, sleep(everyMs, undefined, { signal: abort.signal }).catch(() => undefined)]);
        if (finished) return END;
      }
      const value = await load();
      const key = fingerprint(value);
      if (done(value)) finished = true;
      if (key !== last) {
        last = key;
        return { value, done: false };
      }
    }
  }, () => {
    finished = true;
    abort.abort();
  });
}
