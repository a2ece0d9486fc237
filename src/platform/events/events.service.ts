/** Reading events (for subscriptions and the event history) under the caller's tenant scope. */
import type { FilterQuery, MikroORM } from '@mikro-orm/postgresql';
import { tenantEm } from '../db/tenant.ts';
import { notFound } from '../errors.ts';
import { idFloor } from '../ids.ts';
import type { CursorCodec, Page, PageRequest } from '../pagination.ts';
import type { Scope } from '../auth/scope.ts';
import { Event } from './events.entities.ts';

/** Which events a history page holds: type names or `prefix.*` patterns (none: all), and a time range. */
export type EventFilter = { types?: readonly string[] | null; createdAfter?: Date | null; createdBefore?: Date | null };

export class EventsService {
  readonly #orm: MikroORM;
  readonly #cursors: CursorCodec;

  constructor(deps: { orm: MikroORM; cursors: CursorCodec }) {
    this.#orm = deps.orm;
    this.#cursors = deps.cursors;
  }

  /**
   * The organization's event history in this mode, newest first (the (organization, mode, id)
   * index), optionally of some types (names or `prefix.*`) and created within a time range.
   */
  list(scope: Scope, filter: EventFilter, page: PageRequest): Promise<Page<Event>> {
    const types = filter.types?.length && !filter.types.includes('*') ? filter.types : null;
    const where: Record<string, unknown>[] = [];
    if (types) {
      const names = types.filter((t) => !t.endsWith('.*'));
      const prefixes = types.filter((t) => t.endsWith('.*')).map((t) => `${t.slice(0, -1).replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      where.push({ $or: [...(names.length ? [{ type: { $in: names } }] : []), ...prefixes.map((p) => ({ type: { $like: p } }))] });
    }
    if (filter.createdAfter) where.push({ createdAt: { $gt: filter.createdAfter } });
    if (filter.createdBefore) where.push({ createdAt: { $lt: filter.createdBefore } });
    const key = { list: 'events', filters: { types: types ? [...types].sort() : null, after: filter.createdAfter?.toISOString() ?? null, before: filter.createdBefore?.toISOString() ?? null } };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Event, scope, key, page, (where.length ? { $and: where } : {}) as FilterQuery<Event>);
  }

  /**
   * Removes events older than `before` across organizations (the history's retention); ids are
   * time-ordered, so the time is an id bound on the primary key. Returns how many were removed.
   */
  prune(before: Date): Promise<number> {
    return this.#orm.em.fork().nativeDelete(Event, { id: { $lt: idFloor('evt', before.getTime()) } }, { filters: false });
  }

  async get(scope: Scope, id: string): Promise<Event> {
    const e = await tenantEm(this.#orm, scope).findOne(Event, { id });
    if (!e) throw notFound('Event', id);
    return e;
  }

  /** The events of `ids` in the caller's tenant, in the order of `ids` (unknown ones left out): one query. */
  async getMany(scope: Scope, ids: readonly string[]): Promise<Event[]> {
    if (ids.length === 0) return [];
    const found = new Map((await tenantEm(this.#orm, scope).find(Event, { id: { $in: [...ids] } })).map((e) => [e.id, e]));
    return ids.flatMap((id) => found.get(id) ?? []);
  }
}
