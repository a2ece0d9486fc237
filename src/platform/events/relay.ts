/**
 * The outbox relay: hands each committed event to the consumers (webhook fan-out today; flow
 * triggers later) and to live subscribers, then marks it dispatched, all in one transaction, so
 * an event is dispatched exactly once even with several instances (FOR UPDATE SKIP LOCKED).
 * A trigger NOTIFYs `events_outbox` at commit; a 1 s poll is the backstop.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import pg from 'pg';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { ALL_TENANTS } from '../db/tenant.ts';
import { Event } from './events.entities.ts';
import { publishNotices } from './bus.ts';

export type EventConsumer = (tx: EntityManager, event: Event) => Promise<void>;

const BATCH = 100;

export class EventRelay {
  readonly #orm: MikroORM;
  readonly #url: string;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #consumers: EventConsumer[] = [];
  #client: pg.Client | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;

  constructor(deps: { orm: MikroORM; url: string; clock: Clock; log: Logger }) {
    this.#orm = deps.orm;
    this.#url = deps.url;
    this.#clock = deps.clock;
    this.#log = deps.log;
  }

  addConsumer(consumer: EventConsumer): void {
    this.#consumers.push(consumer);
  }

  /** Called after a drain dispatched events (the webhook worker looks for the new deliveries at once). */
  onDispatched: (() => void) | undefined;

  async start(): Promise<void> {
    this.#stopped = false;
    const client = new pg.Client({ connectionString: this.#url });
    client.on('error', () => {});
    client.on('notification', () => this.kick());
    await client.connect();
    await client.query('listen events_outbox');
    this.#client = client;
    this.#timer = setInterval(() => this.kick(), 1000);
    this.#timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#running;
    await this.#client?.end().catch(() => {});
    this.#client = undefined;
  }

  /** Schedules a drain (coalescing concurrent requests). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          for (;;) {
            const n = await this.drainOnce();
            if (n > 0) this.onDispatched?.();
            if (n < BATCH || this.#stopped) break;
          }
        } while (this.#again && !this.#stopped);
      } catch (e) {
        this.#log.error({ err: e }, 'event relay failed');
      } finally {
        this.#running = undefined;
      }
    })();
  }

  /** Dispatches up to one batch of undispatched events; returns how many. */
  async drainOnce(): Promise<number> {
    return this.#orm.em.fork().transactional(async (tx) => {
      const events = await tx.find(Event, { dispatchedAt: null }, { ...ALL_TENANTS, orderBy: { id: 'asc' }, limit: BATCH, lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE });
      const now = this.#clock.now();
      for (const event of events) {
        for (const consume of this.#consumers) await consume(tx, event);
        event.dispatchedAt = now;
      }
      await publishNotices(tx, events.map((e) => ({ kind: 'event' as const, id: e.id, organizationId: e.organizationId, mode: e.mode, type: e.type, resourceId: e.resourceId })));
      return events.length;
    });
  }
}
