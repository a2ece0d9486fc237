/**
 * The sandbox provider's memory of what it has accepted, keyed by the send's idempotency key (our
 * message id). It is what makes a sandbox send happen once although the delivery job may run
 * twice: the first `claim` records the send, every later one gets the recorded provider id back.
 * PostgreSQL backs it in the app (state may not live in one process), memory backs unit tests.
 */
import type pg from 'pg';
import type { Channel } from './types.ts';

export type SendClaim = {
  idempotencyKey: string;
  provider: string;
  channel: Channel;
  /** The id to record when this claim is the first; ignored when the key is already known. */
  providerMessageId: string;
  recipients: string[];
  payload: unknown;
};

export type ClaimResult = {
  /** The recorded provider id: the claim's own when `first`, otherwise the one recorded first. */
  providerMessageId: string;
  /** True for the call that recorded the send (and so must perform its side effects). */
  first: boolean;
};

export interface SendStore {
  claim(entry: SendClaim): Promise<ClaimResult>;
}

/** Anything that runs a parameterised query: a `pg.Pool` (or a client checked out of one). */
export type Queryable = Pick<pg.Pool, 'query'>;

/** Over the `sandbox_sends` table (created by the app's migrations). */
export class PgSendStore implements SendStore {
  readonly #db: Queryable;

  constructor(db: Queryable) {
    this.#db = db;
  }

  async claim(entry: SendClaim): Promise<ClaimResult> {
    const inserted = await this.#db.query<{ provider_message_id: string }>(
      `insert into sandbox_sends (idempotency_key, provider, channel, provider_message_id, recipients, payload)
       values ($1, $2, $3, $4, $5::jsonb, $6::jsonb)
       on conflict (idempotency_key) do nothing
       returning provider_message_id`,
      [entry.idempotencyKey, entry.provider, entry.channel, entry.providerMessageId, JSON.stringify(entry.recipients), JSON.stringify(entry.payload ?? null)],
    );
    if (inserted.rows[0]) return { providerMessageId: inserted.rows[0].provider_message_id, first: true };
    // A second statement, not a CTE: under READ COMMITTED it takes a fresh snapshot, so it sees a
    // row a concurrent claim committed while our insert waited on its key. One statement would not.
    const existing = await this.#db.query<{ provider_message_id: string }>(
      'select provider_message_id from sandbox_sends where idempotency_key = $1',
      [entry.idempotencyKey],
    );
    const row = existing.rows[0];
    if (!row) throw new Error(`sandbox_sends: key ${entry.idempotencyKey} conflicted but no row was found`);
    return { providerMessageId: row.provider_message_id, first: false };
  }

  /**
   * What the sandbox accepted for a key (our message id), as the recipient received it; undefined
   * before the send. Test-mode tooling only (verify's sandbox code route): the caller has already
   * established that the message is its tenant's.
   */
  async recorded(idempotencyKey: string): Promise<{ channel: string; recipients: string[]; payload: unknown } | undefined> {
    const { rows } = await this.#db.query<{ channel: string; recipients: string[]; payload: unknown }>(
      'select channel, recipients, payload from sandbox_sends where idempotency_key = $1',
      [idempotencyKey],
    );
    return rows[0];
  }
}

/** In-process store for unit tests. Not for the app: it forgets on restart and is per process. */
export class MemorySendStore implements SendStore {
  readonly #rows = new Map<string, SendClaim>();

  async claim(entry: SendClaim): Promise<ClaimResult> {
    const existing = this.#rows.get(entry.idempotencyKey);
    if (existing) return { providerMessageId: existing.providerMessageId, first: false };
    this.#rows.set(entry.idempotencyKey, structuredClone(entry));
    return { providerMessageId: entry.providerMessageId, first: true };
  }

  /** What was recorded, for assertions. */
  get entries(): readonly SendClaim[] {
    return [...this.#rows.values()];
  }
}
