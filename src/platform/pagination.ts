/**
 * Keyset pagination with opaque, signed cursors. Ids are time-ordered, so every list pages on
 * `id desc`. A cursor is bound to the tenant, the mode, the list and its filters, and expires;
 * anything else (altered, expired, another tenant's or another filter's) is INVALID_CURSOR.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { badRequest, ServiceError } from './errors.ts';
import type { Clock } from './clock.ts';
import type { EntityManager, EntityName, FilterQuery } from '@mikro-orm/postgresql';
import type { TenantRef } from './db/tenant.ts';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

/**
 * A page request: forward (newest first) after `cursor`, or backward (`backward`, or a `before`
 * cursor) to the `limit` items just before `before` in the list's order (the oldest items without
 * one). Items come newest first either way.
 */
export type PageRequest = { cursor?: string | null | undefined; limit?: number | null | undefined; before?: string | null | undefined; backward?: boolean | null | undefined };
export type Page<T> = {
  items: T[];
  /** More items after the last one (older). */
  hasMore: boolean;
  nextCursor: string | null;
  /** More items before the first one (newer). */
  hasPrevious: boolean;
  total?: number;
  /** The cursor that continues after `id` (Relay edges carry one each). */
  cursorFor: (id: string) => string;
};

/**
 * What a list's fetch reads: `take` rows after `after` in `id desc` order (forward), or, going
 * backward, `take` rows with an id above `before` (when set) in `id asc` order. {@link keysetWhere}
 * and {@link keysetOrder} say it for MikroORM, {@link keysetSql} for SQL.
 */
export type Keyset = { take: number; after: string | undefined; before: string | undefined; backward: boolean };

export const keysetWhere = (k: Keyset): { id?: { $lt: string } | { $gt: string } } =>
  k.after ? { id: { $lt: k.after } } : k.before ? { id: { $gt: k.before } } : {};
export const keysetOrder = (k: Keyset): { id: 'asc' | 'desc' } => ({ id: k.backward ? 'asc' : 'desc' });
/** The keyset as SQL over `column`: a condition (with `?` for its one parameter, or null) and the order. */
export function keysetSql(k: Keyset, column: string): { condition: string | null; param: string | undefined; order: string } {
  const condition = k.after ? `${column} < ?` : k.before ? `${column} > ?` : null;
  return { condition, param: k.after ?? k.before, order: `${column} ${k.backward ? 'asc' : 'desc'}` };
}
/** What a cursor is bound to: which list, with which filters. */
export type ListKey = { list: string; filters?: Record<string, unknown> };

function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => a.localeCompare(b));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

export function validateLimit(limit: number | null | undefined): number {
  if (limit === undefined || limit === null) return DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw badRequest(`limit must be an integer from 1 to ${MAX_LIMIT}`, { field: 'limit', value: limit, expected: `1-${MAX_LIMIT}` });
  }
  return limit;
}

export class CursorCodec {
  readonly #secret: string;
  readonly #ttlSeconds: number;
  readonly #clock: Clock;

  constructor(secret: string, ttlSeconds: number, clock: Clock) {
    this.#secret = secret;
    this.#ttlSeconds = ttlSeconds;
    this.#clock = clock;
  }

  #binding(tenant: TenantRef, key: ListKey): string {
    return createHash('sha256').update(canonical({ o: tenant.organizationId, m: tenant.mode, l: key.list, f: key.filters ?? {} })).digest('base64url').slice(0, 22);
  }

  #sign(payload: string): string {
    return createHmac('sha256', this.#secret).update(`cursor:${payload}`).digest('base64url').slice(0, 32);
  }

  encode(tenant: TenantRef, key: ListKey, afterId: string): string {
    const exp = Math.floor(this.#clock.now().getTime() / 1000) + this.#ttlSeconds;
    const payload = Buffer.from(JSON.stringify({ a: afterId, b: this.#binding(tenant, key), x: exp })).toString('base64url');
    return `${payload}.${this.#sign(payload)}`;
  }

  /** Returns the id to continue after. */
  decode(tenant: TenantRef, key: ListKey, cursor: string): string {
    const invalid = (why: string) => new ServiceError('INVALID_CURSOR', `Cursor is invalid: ${why}`, { field: 'cursor' });
    const [payload, sig, ...rest] = cursor.split('.');
    if (!payload || !sig || rest.length) throw invalid('malformed');
    const expected = Buffer.from(this.#sign(payload));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalid('altered or not issued by this service');
    let data: { a?: unknown; b?: unknown; x?: unknown };
    try {
      data = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      throw invalid('malformed');
    }
    if (data === null || typeof data !== 'object' || typeof data.a !== 'string' || typeof data.b !== 'string' || typeof data.x !== 'number') throw invalid('malformed');
    if (data.x * 1000 < this.#clock.now().getTime()) throw invalid('expired');
    if (data.b !== this.#binding(tenant, key)) throw invalid('issued for another list, filter or account');
    return data.a;
  }

  /**
   * The list recipe of every context: `limit` checked (400 VALIDATION_ERROR), the cursor decoded
   * against this list and its filters (400 INVALID_CURSOR), `take = limit + 1` rows fetched by
   * `fetch` for the {@link Keyset}, and the page built from them.
   */
  async list<T extends { id: string }>(tenant: TenantRef, key: ListKey, req: PageRequest,
    fetch: (k: Keyset) => Promise<T[]>): Promise<Page<T>> {
    const keyset = this.keyset(tenant, key, req);
    return this.page(tenant, key, keyset, await fetch(keyset));
  }

  /** {@link list} over one entity with the EntityManager's filters (the tenant's) and `where`. */
  findPage<T extends { id: string }>(em: EntityManager, entity: EntityName<T>, tenant: TenantRef, key: ListKey, req: PageRequest,
    where: FilterQuery<T> = {} as FilterQuery<T>): Promise<Page<T>> {
    return this.list(tenant, key, req, (k) => {
      const bound = keysetWhere(k);
      return em.find(entity, (bound.id ? { $and: [where, bound] } : where) as FilterQuery<T>, { orderBy: keysetOrder(k) as never, limit: k.take }) as Promise<T[]>;
    });
  }

  /** The request's keyset: `limit` checked, its cursor decoded against this list (400 on either). */
  keyset(tenant: TenantRef, key: ListKey, req: PageRequest): Keyset {
    const limit = validateLimit(req.limit);
    const backward = !!req.backward || (req.before !== undefined && req.before !== null);
    if (backward && req.cursor) throw badRequest('A page goes either after a cursor or before one, not both', { field: 'before' });
    return {
      take: limit + 1,
      after: req.cursor ? this.decode(tenant, key, req.cursor) : undefined,
      before: req.before ? this.decode(tenant, key, req.before) : undefined,
      backward,
    };
  }

  /** Builds a page from the `limit + 1` rows fetched for `keyset` (in its order), newest first. */
  page<T extends { id: string }>(tenant: TenantRef, key: ListKey, keyset: Keyset, rows: T[]): Page<T> {
    const limit = keyset.take - 1;
    const beyond = rows.length > limit;
    const taken = beyond ? rows.slice(0, limit) : rows;
    const items = keyset.backward ? taken.reverse() : taken;
    // Forward: more after the last item when a row beyond it came back, and something before the
    // first whenever the page started after a cursor; backward the other way round.
    const hasMore = keyset.backward ? keyset.before !== undefined : beyond;
    const hasPrevious = keyset.backward ? beyond : keyset.after !== undefined;
    const last = items[items.length - 1];
    return { items, hasMore, hasPrevious, nextCursor: hasMore && last ? this.encode(tenant, key, last.id) : null, cursorFor: (id) => this.encode(tenant, key, id) };
  }
}
