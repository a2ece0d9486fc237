/** Reading events (for subscriptions and the event log) under the caller's tenant scope. */
import type { MikroORM } from '@mikro-orm/postgresql';
import { tenantEm } from '../db/tenant.ts';
import { notFound } from '../errors.ts';
import type { Scope } from '../auth/scope.ts';
import { Event } from './events.entities.ts';

export class EventsService {
  readonly #orm: MikroORM;

  constructor(deps: { orm: MikroORM }) {
    this.#orm = deps.orm;
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
