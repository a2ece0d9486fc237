/** Live subscriptions: bus notices of the connection's tenant turned into values. */
import { isServiceError } from '../platform/errors.ts';
import type { EventBus, LiveNotice, NoticeStream } from '../platform/events/bus.ts';
import { END, liveIterator } from '../platform/events/liveIterator.ts';

/** Whether a notice belongs to the connection's organization and mode. */
export const sameTenant = (ctx: { scope: { organizationId: string; mode: string } }, n: { organizationId: string; mode: string }) =>
  n.organizationId === ctx.scope.organizationId && n.mode === ctx.scope.mode;

/**
 * The events of one resource (a call, a message, a flow execution, a campaign) in the connection's
 * tenant, from the bus's index by resource id: the bus hands this subscriber only that resource's
 * notices, not every notice of the instance.
 */
export function resourceNotices(ctx: { scope: { organizationId: string; mode: string }; platform: { bus: EventBus } }, id: string): NoticeStream {
  return ctx.platform.bus.subscribe((n) => n.kind === 'event' && sameTenant(ctx, n) && n.resourceId === id, { resourceId: id });
}

/** Notices loaded together at most, when a subscriber has several waiting (one query for them all). */
export const LOAD_BATCH = 100;

/**
 * Bus notices mapped to values (after an optional `first` value), on `liveIterator`.
 *
 * With `loadMany` (used instead of `load`), the notices already waiting when one is taken (up to
 * LOAD_BATCH) are loaded in one call, so a consumer keeps up with a burst instead of reading row by
 * row; what it does not return (gone meanwhile) is skipped. A bus that ends the stream with a ServiceError (its consumer
 * fell too far behind) has the error yielded as the last value: the field's resolver returns it and
 * GraphQL sends it as that result's error (graphql-js completes an Error value as a field error),
 * then the stream completes.
 */
export function liveStream<T>(
  notices: NoticeStream, load: (n: LiveNotice) => Promise<T>, first?: () => Promise<T>, loadMany?: (ns: LiveNotice[]) => Promise<T[]>,
): AsyncIterableIterator<T> {
  let initial = first;
  let loaded: T[] = [];
  let ended = false;
  return liveIterator(notices, async () => {
    const pending = initial;
    initial = undefined;
    if (pending) return { value: await pending(), done: false };
    while (loaded.length === 0) {
      if (ended) return END;
      let n: IteratorResult<LiveNotice>;
      try {
        n = await notices.next();
      } catch (e) {
        if (!isServiceError(e)) throw e;
        ended = true;
        return { value: e as unknown as T, done: false };
      }
      if (n.done) return END;
      if (!loadMany) return { value: await load(n.value), done: false };
      loaded = await loadMany([n.value, ...notices.takeQueued(LOAD_BATCH - 1)]);
    }
    return { value: loaded.shift()!, done: false };
  });
}
