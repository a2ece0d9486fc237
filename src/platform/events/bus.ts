/**
 * Live fan-out to subscribers on every instance: a small notice per event, NOTIFYd by the insert
 * statement's trigger on `events` and so delivered when the event commits (migration
 * `20261130010000_events_live_notify`), and one per webhook delivery update, sent by the webhook
 * worker inside its transaction: a notice goes out only for committed changes. Every instance
 * LISTENs and hands notices to its local subscribers, which load what they need under their own
 * tenant scope. A process that commits a change may also hand its events' notices to its own
 * subscribers right after the commit (`deliverLocal`: voice's call changes), and skips the
 * NOTIFY of them, whichever of the two comes first.
 * A NOTIFY payload is one notice or a JSON array of notices (a statement's are packed into as few
 * payloads as fit NOTICE_PAYLOAD_BYTES: every LISTENing backend reads every payload, and every
 * instance parses the ones on this channel).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import { Listener } from '../db/listen.ts';
import { ServiceError } from '../errors.ts';

export const LIVE_CHANNEL = 'events_live';

export type LiveNotice =
  | { kind: 'event'; id: string; organizationId: string; mode: string; type: string; resourceId: string }
  | { kind: 'delivery'; id: string; organizationId: string; mode: string; endpointId: string | null; status: string };

type Subscriber = { accepts: (n: LiveNotice) => boolean; push: (n: LiveNotice) => void };

/**
 * Notices one subscriber may have waiting (about 200 bytes each). A consumer that falls this far
 * behind is ended with SERVICE_UNAVAILABLE after the notices it has, instead of missing notices
 * silently: its client subscribes again and reads what it missed from `GET /v1/events`.
 */
export const SUBSCRIBER_BACKLOG = 10_000;

/** A subscriber's notices: one at a time, or all that are already waiting (to load them together). */
export type NoticeStream = AsyncIterableIterator<LiveNotice> & {
  /** Up to `max` notices already queued, without waiting (none when the queue is empty). */
  takeQueued(max: number): LiveNotice[];
};

/** The subscription was ended because its consumer fell more than `backlog` notices behind. */
export function backlogExceeded(backlog: number): ServiceError {
  return new ServiceError('SERVICE_UNAVAILABLE',
    `This subscription fell more than ${backlog} notices behind and was ended after the ones it had; subscribe again and read what it missed from GET /v1/events`,
    { reason: 'subscriber_backlog', backlog });
}

/** Below PostgreSQL's 8000-byte NOTIFY payload limit, with room to spare. */
export const NOTICE_PAYLOAD_BYTES = 7000;
/** Notices per payload when SQL packs them (json_agg): ~170 bytes each leaves the same margin. */
export const NOTICES_PER_PAYLOAD = 36;

/** Packs notices into JSON-array payloads of at most NOTICE_PAYLOAD_BYTES each (in order). */
export function noticePayloads(notices: readonly LiveNotice[]): string[] {
  const payloads: string[] = [];
  let current: string[] = [];
  let bytes = 2;
  for (const n of notices) {
    const json = JSON.stringify(n);
    if (current.length > 0 && bytes + json.length + 1 > NOTICE_PAYLOAD_BYTES) {
      payloads.push(`[${current.join(',')}]`);
      current = [];
      bytes = 2;
    }
    current.push(json);
    bytes += json.length + 1;
  }
  if (current.length > 0) payloads.push(`[${current.join(',')}]`);
  return payloads;
}

/** Publishes a notice with the caller's transaction (delivered at commit). */
export async function publishNotice(em: EntityManager, notice: LiveNotice): Promise<void> {
  await publishNotices(em, [notice]);
}

/** Several notices in one round trip (and as few payloads as fit). */
export async function publishNotices(em: EntityManager, notices: LiveNotice[]): Promise<void> {
  if (notices.length === 0) return;
  await em.getConnection().execute('select pg_notify(?, n) from jsonb_array_elements_text(cast(? as jsonb)) as n',
    [LIVE_CHANNEL, JSON.stringify(noticePayloads(notices))], 'all', em.getTransactionContext());
}

/**
 * Event ids delivered one way (deliverLocal, or the commit's NOTIFY) whose other delivery may still
 * come (oldest dropped past this: ids whose second delivery never comes, a NOTIFY missed while the
 * LISTEN connection was down or an event committed elsewhere, do not pile up).
 */
const IDS_KEPT = 10_000;

/**
 * A set of the last `kept` ids added (the oldest forgotten first): a ring of the ids in the order
 * added. Forgetting the oldest by walking the set from its start cost a walk over every id deleted
 * since the table was last rebuilt, on each add.
 */
export class RecentIds {
  readonly #ids = new Set<string>();
  readonly #ring: (string | undefined)[];
  #next = 0;

  constructor(kept: number) {
    this.#ring = new Array<string | undefined>(kept);
  }

  add(id: string): void {
    const old = this.#ring[this.#next];
    if (old !== undefined && old !== id) this.#ids.delete(old);
    this.#ring[this.#next] = id;
    this.#next = (this.#next + 1) % this.#ring.length;
    this.#ids.add(id);
  }

  /** Removes `id`; whether it was there. */
  delete(id: string): boolean {
    return this.#ids.delete(id);
  }

  get size(): number {
    return this.#ids.size;
  }
}

export class EventBus {
  /** Subscribers that look at every notice. */
  readonly #subscribers = new Set<Subscriber>();
  /** Subscribers to one resource's events, by resource id: a notice is shown only to its resource's. */
  readonly #byResource = new Map<string, Set<Subscriber>>();
  #count = 0;
  /** Events already delivered here by deliverLocal. */
  readonly #local = new RecentIds(IDS_KEPT);
  /** Events delivered here from a NOTIFY, in case their deliverLocal is still to come. */
  readonly #relayed = new RecentIds(IDS_KEPT);
  readonly #listener: Listener;
  readonly #backlog: number;

  /**
   * `connectTimeoutMs` bounds connecting its LISTEN connection (platform/db/listen.ts: it comes back by itself when lost);
   * `backlog` is the notices a subscriber may have waiting (SUBSCRIBER_BACKLOG).
   */
  constructor(url: string, log: Logger, connectTimeoutMs = 5000, opts: { backlog?: number } = {}) {
    this.#backlog = opts.backlog ?? SUBSCRIBER_BACKLOG;
    this.#listener = new Listener({
      url, channel: LIVE_CHANNEL, connectTimeoutMs, log,
      onNotification: (payload) => this.received(payload),
    });
  }

  /**
   * A NOTIFY payload (the LISTEN connection's: one notice or an array). An event already handed
   * over by deliverLocal is skipped; any other event is remembered, so that a deliverLocal of it
   * that comes later (the NOTIFY overtook the COMMIT's reply) does not hand it over a second time.
   */
  received(payload: string | undefined): void {
    // A workers-only process has no subscribers: it need not parse every notice it receives.
    if (!payload || this.#count === 0) return;
    let parsed: LiveNotice | LiveNotice[];
    try {
      parsed = JSON.parse(payload) as LiveNotice | LiveNotice[];
    } catch {
      return;
    }
    for (const notice of Array.isArray(parsed) ? parsed : [parsed]) {
      if (typeof notice !== 'object' || notice === null) continue;
      if (notice.kind === 'event') {
        // Already handed over by the process that committed it (deliverLocal).
        if (this.#local.delete(notice.id)) continue;
        this.#relayed.add(notice.id);
      }
      this.#dispatch(notice);
    }
  }

  start(): Promise<void> {
    return this.#listener.start();
  }

  #dispatch(notice: LiveNotice): void {
    for (const s of this.#subscribers) if (s.accepts(notice)) s.push(notice);
    const watchers = notice.kind === 'event' ? this.#byResource.get(notice.resourceId) : undefined;
    if (watchers) for (const s of watchers) if (s.accepts(notice)) s.push(notice);
  }

  /**
   * Notices of events this process has just committed, handed to its own subscribers at once
   * instead of through the LISTEN connection (the commit's NOTIFY of the same events still reaches
   * every other instance, and is skipped here). Call it only after the commit.
   */
  deliverLocal(notices: readonly LiveNotice[]): void {
    if (this.#count === 0) return;
    for (const notice of notices) {
      // Its NOTIFY came first (and was handed over then).
      if (this.#relayed.delete(notice.id)) continue;
      this.#local.add(notice.id);
      this.#dispatch(notice);
    }
  }

  stop(): Promise<void> {
    return this.#listener.stop();
  }

  /**
   * Notices accepted by `accepts`, as an async iterator that ends when the consumer returns. One
   * that falls more than the backlog behind is told so (backlogExceeded) once it has read the
   * notices it holds, and ends: no notice is ever dropped without its consumer knowing.
   */
  subscribe(accepts: (n: LiveNotice) => boolean, options: { resourceId?: string } = {}): NoticeStream {
    const queue: LiveNotice[] = [];
    const backlog = this.#backlog;
    let wake: (() => void) | undefined;
    let done = false;
    let overflowed = false;
    const finish = () => {
      done = true;
      this.#remove(sub, options.resourceId);
      wake?.();
    };
    const sub: Subscriber = {
      accepts,
      push: (n) => {
        if (queue.length < backlog) queue.push(n);
        else {
          overflowed = true;
          this.#remove(sub, options.resourceId);
        }
        wake?.();
      },
    };
    this.#add(sub, options.resourceId);
    const iterator: NoticeStream = {
      [Symbol.asyncIterator]: () => iterator,
      next: async () => {
        while (!done && !overflowed && queue.length === 0) await new Promise<void>((r) => { wake = r; });
        wake = undefined;
        if (done) return { value: undefined, done: true };
        if (queue.length === 0) {
          finish();
          throw backlogExceeded(backlog);
        }
        return { value: queue.shift()!, done: false };
      },
      takeQueued: (max) => (done ? [] : queue.splice(0, max)),
      return: async () => {
        finish();
        return { value: undefined, done: true };
      },
    };
    return iterator;
  }

  #add(sub: Subscriber, resourceId: string | undefined): void {
    if (resourceId === undefined) this.#subscribers.add(sub);
    else {
      const watchers = this.#byResource.get(resourceId);
      if (watchers) watchers.add(sub);
      else this.#byResource.set(resourceId, new Set([sub]));
    }
    this.#count++;
  }

  #remove(sub: Subscriber, resourceId: string | undefined): void {
    const from = resourceId === undefined ? this.#subscribers : this.#byResource.get(resourceId);
    if (!from?.delete(sub)) return;
    this.#count--;
    if (resourceId !== undefined && from.size === 0) this.#byResource.delete(resourceId);
  }

  get subscriberCount(): number {
    return this.#count;
  }

  /** Whether a subscriber here watches `resourceId`'s events by name (subscribe's `resourceId`). */
  watching(resourceId: string): boolean {
    return this.#byResource.has(resourceId);
  }
}
