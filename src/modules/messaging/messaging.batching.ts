/**
 * The send hot path's database work, batched across concurrent requests (platform/db/batcher.ts):
 *
 * - `SenderLookup`: the `from` check and the default sender of many requests in one statement;
 * - `AcceptanceWriter`: the group commit of accepted messages. The messages, their `message.queued`
 *   events, their usage entries and their delivery jobs (pg-boss's own insert statement) go to
 *   PostgreSQL as one simple-protocol query: one implicit transaction, one round trip, however many
 *   requests it carries. A request is answered only after its batch committed, so an accepted
 *   message is never lost; a batch that fails is retried item by item, so one bad row fails alone.
 *
 * Sends inside a caller's transaction (`SendOptions.within`) do not come here: they commit with it.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { insertRowsSql } from '../../platform/db/rowsets.ts';
import { EVENT_COLUMNS, eventRow, type EventInput } from '../../platform/events/events.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow, type UsageInput } from '../../platform/usage/usage.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import { Message } from './messaging.entities.ts';

export type SenderQuery = { tenant: TenantRef; channel: Channel; address: string | null };

/** Finds, for each query, the owned sender with that address, or (address null) the default sender. */
export class SenderLookup {
  readonly #pool: Pool;
  readonly #batcher: Batcher<SenderQuery, string | null>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#batcher = new Batcher((queries) => this.#run(queries), { maxInFlight: 2 });
  }

  find(query: SenderQuery): Promise<string | null> {
    return this.#batcher.submit(query);
  }

  async #run(queries: SenderQuery[]): Promise<(string | null)[]> {
    const { rows } = await this.#pool.query<{ idx: string; address: string | null }>({
      name: 'messaging_sender_lookup',
      text: `select r.idx, s.address
             from unnest($1::text[], $2::text[], $3::text[], $4::text[]) with ordinality as r(org, mode, channel, address, idx)
             left join lateral (
               select address from message_senders m
               where m.organization_id = r.org and m.mode = r.mode and m.channel = r.channel and (r.address is null or m.address = r.address)
               order by m.is_default desc, m.id asc limit 1
             ) s on true`,
      values: [
        queries.map((q) => q.tenant.organizationId), queries.map((q) => q.tenant.mode),
        queries.map((q) => q.channel), queries.map((q) => q.address),
      ],
    });
    const found = new Map(rows.map((r) => [Number(r.idx), r.address]));
    return queries.map((_, i) => found.get(i + 1) ?? null);
  }
}

export type Acceptance = {
  scope: Scope;
  message: Message;
  event: EventInput;
  usage: UsageInput;
  job: { name: string; data: object; id: string };
};

export class AcceptanceWriter {
  readonly #pool: Pool;
  readonly #jobs: Pick<Jobs, 'insertSql'>;
  readonly #columns: { property: string; column: string }[];
  readonly #batcher: Batcher<Acceptance, true>;

  constructor(deps: { orm: MikroORM; pool: Pool; jobs: Pick<Jobs, 'insertSql'> }) {
    this.#pool = deps.pool;
    this.#jobs = deps.jobs;
    // The messages columns come from the entity's metadata, so the insert follows the schema.
    this.#columns = Object.values(deps.orm.getMetadata().get(Message).properties)
      .filter((p) => p.persist !== false && p.fieldNames?.length === 1)
      .map((p) => ({ property: p.name, column: p.fieldNames[0]! }));
    this.#batcher = new Batcher((items) => this.#write(items), { maxInFlight: 2, isolate: true, maxBatch: 200 });
  }

  /** Resolves once the message, its event, usage entry and job are committed. */
  accept(acceptance: Acceptance): Promise<true> {
    return this.#batcher.submit(acceptance);
  }

  async #write(items: Acceptance[]): Promise<true[]> {
    const jobs = new Map<string, { data: object; scope: Scope; id: string }[]>();
    for (const item of items) {
      const list = jobs.get(item.job.name) ?? [];
      list.push({ data: item.job.data, scope: item.scope, id: item.job.id });
      jobs.set(item.job.name, list);
    }
    const statements = [
      insertRowsSql({
        table: 'messages', columns: this.#columns.map((c) => c.column),
        rows: items.map((item) => {
          const m = item.message as unknown as Record<string, unknown>;
          return Object.fromEntries(this.#columns.map((c) => [c.column, m[c.property]]));
        }),
      }),
      insertRowsSql({ table: 'events', columns: EVENT_COLUMNS, rows: items.map((item) => eventRow(item.scope, item.event, item.message.createdAt)) }),
      insertRowsSql({ table: 'usage_entries', columns: USAGE_COLUMNS, rows: items.map((item) => usageRow(item.scope, item.usage, item.message.createdAt)), onConflict: USAGE_ON_CONFLICT }),
      ...(await Promise.all([...jobs].map(([name, entries]) => this.#jobs.insertSql(name, entries)))),
    ];
    await this.#pool.query(statements.join(';\n'));
    return items.map(() => true as const);
  }
}
