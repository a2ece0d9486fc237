/**
 * Live fan-out to subscribers on every instance: the relay publishes a small notice per
 * dispatched event (and the webhook worker per delivery update) with pg_notify inside its
 * transaction, so a notice goes out only for committed changes; every instance LISTENs and hands
 * notices to its local subscribers, which load what they need under their own tenant scope.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from '../logger.ts';

export const LIVE_CHANNEL = 'events_live';

export type LiveNotice =
  | { kind: 'event'; id: string; organizationId: string; mode: string; type: string; resourceId: string }
  | { kind: 'delivery'; id: string; organizationId: string; mode: string; endpointId: string | null; status: string };

type Subscriber = { accepts: (n: LiveNotice) => boolean; push: (n: LiveNotice) => void };

/** Publishes a notice with the caller's transaction (delivered at commit). */
export async function publishNotice(em: EntityManager, notice: LiveNotice): Promise<void> {
  await publishNotices(em, [notice]);
}

/** Several notices in one round trip. */
export async function publishNotices(em: EntityManager, notices: LiveNotice[]): Promise<void> {
  if (notices.length === 0) return;
  await em.getConnection().execute('select pg_notify(?, n) from jsonb_array_elements_text(cast(? as jsonb)) as n',
    [LIVE_CHANNEL, JSON.stringify(notices.map((n) => JSON.stringify(n)))], 'all', em.getTransactionContext());
}

export class EventBus {
  readonly #url: string;
  readonly #log: Logger;
  readonly #subscribers = new Set<Subscriber>();
  #client: pg.Client | undefined;
  #stopped = false;

  constructor(url: string, log: Logger) {
    this.#url = url;
    this.#log = log;
  }

  async start(): Promise<void> {
    this.#stopped = false;
    const client = new pg.Client({ connectionString: this.#url });
    const lost = () => {
      if (this.#client === client) this.#client = undefined;
      if (!this.#stopped) setTimeout(() => { void this.start().catch((e: unknown) => this.#log.warn({ err: e }, 'event bus reconnect failed')); }, 1000).unref();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (msg) => {
      if (!msg.payload) return;
      let notice: LiveNotice;
      try {
        notice = JSON.parse(msg.payload) as LiveNotice;
      } catch {
        return;
      }
      for (const s of this.#subscribers) if (s.accepts(notice)) s.push(notice);
    });
    await client.connect();
    await client.query(`listen ${LIVE_CHANNEL}`);
    this.#client = client;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const c = this.#client;
    this.#client = undefined;
    await c?.end().catch(() => {});
  }

  /** Notices accepted by `accepts`, as an async iterator that ends when the consumer returns. */
  subscribe(accepts: (n: LiveNotice) => boolean): AsyncIterableIterator<LiveNotice> {
    const queue: LiveNotice[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    const sub: Subscriber = {
      accepts,
      push: (n) => {
        if (queue.length < 1000) queue.push(n);
        wake?.();
      },
    };
    this.#subscribers.add(sub);
    const finish = () => {
      done = true;
      this.#subscribers.delete(sub);
      wake?.();
    };
    const iterator: AsyncIterableIterator<LiveNotice> = {
      [Symbol.asyncIterator]: () => iterator,
      next: async () => {
        while (!done && queue.length === 0) await new Promise<void>((r) => { wake = r; });
        wake = undefined;
        if (done) return { value: undefined, done: true };
        return { value: queue.shift()!, done: false };
      },
      return: async () => {
        finish();
        return { value: undefined, done: true };
      },
    };
    return iterator;
  }

  get subscriberCount(): number {
    return this.#subscribers.size;
  }
}
