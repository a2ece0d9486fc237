/**
 * The one shape of a live stream over bus notices (GraphQL subscriptions: `graphql/live.ts`,
 * flows' step log, campaigns' progress). A plain iterator, not an async generator: a generator
 * parked on the next notice cannot run `return()` (the client unsubscribing or disconnecting)
 * until another notice arrives, so its bus subscription would outlive it. Here `return()` and any
 * error end the bus subscription at once; `step` says what comes next.
 */
import type { LiveNotice } from './bus.ts';

export function liveIterator<T>(
  notices: AsyncIterator<LiveNotice>, step: () => Promise<IteratorResult<T, undefined>>, onReturn?: () => void,
): AsyncIterableIterator<T> {
  const stream: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => stream,
    next: async () => {
      try {
        return await step();
      } catch (e) {
        await notices.return?.();
        throw e;
      }
    },
    return: async () => {
      onReturn?.();
      await notices.return?.();
      return { value: undefined, done: true };
    },
  };
  return stream;
}

/** The end of a stream, as `step` answers it. */
export const END: IteratorReturnResult<undefined> = { value: undefined, done: true };
