/**
 * Idempotency-Key support for POST requests (REST) and GraphQL mutations. The first response for
 * a key is stored per tenant and mode for 24 h and replayed byte for byte; the same key with a
 * different request, or while the first is still running, is CONFLICT. Server errors (5xx) are not
 * stored, so the client may retry them with the same key.
 *
 * The stored response is written after the request's own work committed, so a process that dies in
 * between leaves the claim running; after STALE_LOCK_MS a retry takes it over and runs again. Work
 * that must not happen twice records the key on its own row, in its own commit: the request's
 * operations see the claim (`RequestContext.idempotency`) and take one {@link RecordedKey} per send
 * (messages: a unique index on `messages.idempotency_key`, see MessagingService).
 */
import { createHash } from 'node:crypto';
import { Sealer } from './crypto/seal.ts';
import type { Pool } from 'pg';
import type { Clock } from './clock.ts';
import { badRequest, ServiceError } from './errors.ts';
import type { TenantRef } from './db/tenant.ts';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** A running claim older than this is taken to belong to a crashed request and may be taken over. */
const STALE_LOCK_MS = 60_000;

export type StoredResponse = { status: number; headers: Record<string, string>; body: string };
/** `resumed`: the claim was taken over from a request that did not finish (its work may have committed). */
export type BeginResult = { kind: 'new'; resumed: boolean } | ({ kind: 'replay' } & StoredResponse);

/** What a send records of the request's Idempotency-Key on its own row (see {@link IdempotencyClaim.next}). */
export type RecordedKey = {
  /** `<n>:<key>`: the request's n-th send (from 0) under the key. */
  key: string;
  /** The start of the request's hash: a different request reusing the key is told apart. */
  hash: string;
  /** The claim was taken over: look for the row of an earlier attempt before doing the work. */
  resumed: boolean;
};

/**
 * The Idempotency-Key a request runs under, as its operations see it. Each send that records the
 * key takes the next ordinal, so the sends of one request (several mutation fields of a GraphQL
 * document, which run in order) keep distinct keys, the same ones on every attempt.
 */
export class IdempotencyClaim {
  readonly key: string;
  readonly requestHash: string;
  readonly resumed: boolean;
  #sends = 0;

  constructor(key: string, requestHash: string, resumed: boolean) {
    this.key = key;
    this.requestHash = requestHash;
    this.resumed = resumed;
  }

  next(): RecordedKey {
    return { key: `${this.#sends++}:${this.key}`, hash: this.requestHash.slice(0, 32), resumed: this.resumed };
  }
}

export function requestHash(method: string, path: string, body: string): string {
  return createHash('sha256').update(`${method}\n${path}\n${body}`).digest('hex');
}

export function validateIdempotencyKey(key: string): string {
  if (key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw badRequest('Idempotency-Key must be 1-255 visible ASCII characters', { field: 'Idempotency-Key' });
  }
  return key;
}

/**
 * Stored responses can hold secrets (a created API key is shown once, and its replay shows it
 * again to the same caller), so bodies are sealed at rest.
 */
export class IdempotencyStore {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #seal: Sealer;

  constructor(pool: Pool, clock: Clock, appSecret: string) {
    this.#pool = pool;
    this.#clock = clock;
    this.#seal = new Sealer(appSecret, 'idempotency-response-v1');
  }

  async begin(tenant: TenantRef, key: string, hash: string): Promise<BeginResult> {
    const now = this.#clock.now();
    for (let attempt = 0; attempt < 3; attempt++) {
      // Named: parsed once per connection and, from the sixth execution, run on its generic plan
      // (unnamed, the claim and the completion below were planned on every request: 16 s of the
      // database's time per 10 minutes in the soak at 566/s, session 12).
      const inserted = await this.#pool.query({
        name: 'idempotency_claim',
        text: `insert into idempotency_keys (organization_id, mode, key, request_hash, state, created_at, locked_at)
         values ($1, $2, $3, $4, 'running', $5, $5) on conflict do nothing`,
        values: [tenant.organizationId, tenant.mode, key, hash, now],
      });
      if (inserted.rowCount === 1) return { kind: 'new', resumed: false };
      const { rows } = await this.#pool.query(
        'select * from idempotency_keys where organization_id = $1 and mode = $2 and key = $3',
        [tenant.organizationId, tenant.mode, key],
      );
      const row = rows[0];
      if (!row) continue; // deleted in between: try to claim again
      if (now.getTime() - new Date(row.created_at).getTime() > IDEMPOTENCY_TTL_MS) {
        await this.#pool.query('delete from idempotency_keys where organization_id = $1 and mode = $2 and key = $3 and created_at = $4',
          [tenant.organizationId, tenant.mode, key, row.created_at]);
        continue;
      }
      if (row.request_hash !== hash) {
        throw new ServiceError('CONFLICT', 'This Idempotency-Key was already used with a different request', { idempotency_key: key });
      }
      if (row.state === 'done') {
        return { kind: 'replay', status: row.response_status, headers: row.response_headers ?? {}, body: row.response_body ? this.#seal.open(row.response_body) : '' };
      }
      if (now.getTime() - new Date(row.locked_at).getTime() < STALE_LOCK_MS) {
        throw new ServiceError('CONFLICT', 'A request with this Idempotency-Key is still being processed', { idempotency_key: key });
      }
      const takeover = await this.#pool.query(
        `update idempotency_keys set locked_at = $5 where organization_id = $1 and mode = $2 and key = $3 and locked_at = $4 and state = 'running'`,
        [tenant.organizationId, tenant.mode, key, row.locked_at, now],
      );
      if (takeover.rowCount === 1) return { kind: 'new', resumed: true };
    }
    throw new ServiceError('CONFLICT', 'A request with this Idempotency-Key is still being processed', { idempotency_key: key });
  }

  async complete(tenant: TenantRef, key: string, response: StoredResponse): Promise<void> {
    if (response.status >= 500) return this.abandon(tenant, key);
    await this.#pool.query({
      name: 'idempotency_complete',
      text: `update idempotency_keys set state = 'done', response_status = $4, response_headers = $5, response_body = $6
        where organization_id = $1 and mode = $2 and key = $3`,
      values: [tenant.organizationId, tenant.mode, key, response.status, JSON.stringify(response.headers), this.#seal.seal(response.body)],
    });
  }

  async abandon(tenant: TenantRef, key: string): Promise<void> {
    await this.#pool.query(`delete from idempotency_keys where organization_id = $1 and mode = $2 and key = $3 and state = 'running'`,
      [tenant.organizationId, tenant.mode, key]);
  }

  async prune(now: Date): Promise<number> {
    const { rowCount } = await this.#pool.query('delete from idempotency_keys where created_at < $1', [new Date(now.getTime() - IDEMPOTENCY_TTL_MS)]);
    return rowCount ?? 0;
  }
}
