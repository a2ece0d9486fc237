/** Live subscriptions: bus notices of the connection's tenant turned into values. */
import type { LiveNotice } from '../platform/events/bus.ts';

/** Whether a notice belongs to the connection's organization and mode. */
export const sameTenant = (ctx: { scope: { organizationId: string; mode: string } }, n: { organizationId: string; mode: string }) =>
  n.organizationId === ctx.scope.organizationId && n.mode === ctx.scope.mode;

/**
 * Bus notices mapped to values (after an optional `first` value). A plain iterator, not an async
 * generator: a generator parked on the next notice cannot run `return()` (the client unsubscribing
 * or disconnecting) until another notice arrives, so its bus subscription would outlive it.
 */
export function liveStream<T>(notices: AsyncIterableIterator<LiveNotice>, load: (n: LiveNotice) => Promise<T>, first?: () => Promise<T>): AsyncIterableIterator<T> {
  let initial = first;
  const stream: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => stream,
    next: async () => {
      try {
        const pending = initial;
        initial = undefined;
        if (pending) return { value: await pending(), done: false };
        const n = await notices.next();
        return n.done ? { value: undefined, done: true } : { value: await load(n.value), done: false };
      } catch (e) {
        await notices.return?.();
        throw e;
      }
    },
    return: async () => {
      await notices.return?.();
      return { value: undefined, done: true };
    },
  };
  return stream;
}
