/**
 * The sandbox provider's memory of what it has accepted, keyed by the send's idempotency key (our
 * message id). It is what makes a sandbox send happen once although the delivery job may run
 * twice: the first `claim` records the send, every later one gets the recorded provider id back.
 * PostgreSQL backs it in the app (state may not live in one process), memory backs unit tests.
 */
import type pg from 'pg';
import { Batcher } from '../../platform/db/batcher.ts';
import type { Sealer } from '../../platform/crypto/seal.ts';
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

/**
 * Over the `sandbox_sends` table (created by the app's migrations). Concurrent claims share one
 * multi-row insert (platform/db/batcher.ts): one commit for many sends instead of one each.
 */
/** The Sealer purpose every PgSendStore of one deployment shares (messaging writes, verify reads). */
export const SANDBOX_SENDS_PURPOSE = 'sandbox-sends-v1';

export class PgSendStore implements SendStore {
  readonly #db: Queryable;
  readonly #batcher: Batcher<SendClaim, ClaimResult>;
  readonly #sealer: Sealer | undefined;

  /**
   * With a sealer, payloads (what the recipient received: message content, possibly PHI) are kept
   * sealed as `{ "sealed": "v1:…" }`, so the sandbox's records leave no content in clear in the database.
   */
  constructor(db: Queryable, sealer?: Sealer) {
    this.#db = db;
    this.#sealer = sealer;
    this.#batcher = new Batcher((entries) => this.#claimMany(entries), { maxInFlight: 2 });
  }

  claim(entry: SendClaim): Promise<ClaimResult> {
    return this.#batcher.submit(entry);
  }

  async #claimMany(entries: SendClaim[]): Promise<(ClaimResult | Error)[]> {
    const col = <T>(pick: (e: SendClaim) => T) => entries.map(pick);
    const inserted = await this.#db.query<{ idempotency_key: string; provider_message_id: string }>({
      name: 'sandbox_sends_claim',
      text: `insert into sandbox_sends (idempotency_key, provider, channel, provider_message_id, recipients, payload)
             select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[])
             on conflict (idempotency_key) do nothing
             returning idempotency_key, provider_message_id`,
      values: [
        col((e) => e.idempotencyKey), col((e) => e.provider), col((e) => e.channel), col((e) => e.providerMessageId),
        col((e) => JSON.stringify(e.recipients)), col((e) => JSON.stringify(this.#sealer ? { sealed: this.#sealer.seal(JSON.stringify(e.payload ?? null)) } : (e.payload ?? null))),
      ],
    });
    const recorded = new Map(inserted.rows.map((r) => [r.idempotency_key, r.provider_message_id]));
    const won = new Set(recorded.keys());
    const missing = [...new Set(entries.map((e) => e.idempotencyKey).filter((k) => !recorded.has(k)))];
    if (missing.length > 0) {
      // A second statement, not a CTE: under READ COMMITTED it takes a fresh snapshot, so it sees
      // rows a concurrent claim committed while our insert waited on their keys. One would not.
      const existing = await this.#db.query<{ idempotency_key: string; provider_message_id: string }>(
        'select idempotency_key, provider_message_id from sandbox_sends where idempotency_key = any($1::text[])',
        [missing],
      );
      for (const r of existing.rows) recorded.set(r.idempotency_key, r.provider_message_id);
    }
    return entries.map((e) => {
      const providerMessageId = recorded.get(e.idempotencyKey);
      if (providerMessageId === undefined) return new Error(`sandbox_sends: key ${e.idempotencyKey} conflicted but no row was found`);
      // The first claim of a key this batch inserted is the one that performs the send.
      const first = won.delete(e.idempotencyKey);
      return { providerMessageId, first };
    });
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
    const row = rows[0];
    const sealed = (row?.payload as { sealed?: unknown } | null)?.sealed;
    if (row && this.#sealer && typeof sealed === 'string') row.payload = JSON.parse(this.#sealer.open(sealed));
    return row;
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
