/**
 * The send hot path's database work, batched across concurrent requests (platform/db/batcher.ts):
 *
 * - `SenderLookup`: the `from` check and the default sender of many requests in one statement;
 * - `AcceptanceWriter`: the group commit of accepted messages. The messages, their `message.queued`
 *   events, their usage entries and their rows of the delivery queue (messaging.queue.ts) go to
 *   PostgreSQL as one prepared statement: one implicit transaction, one round trip, however many
 *   requests it carries. A request is answered only after its batch committed, so an accepted
 *   message is never lost; a batch that fails is retried item by item, so one bad row fails alone.
 * - `MessageReader`: the delivery and report jobs' reads of messages by id, many in one statement;
 *
 * Status changes of many messages in one statement are messaging.transitions.ts's `TransitionWriter`.
 *
 * Sends inside a caller's transaction (`SendOptions.within`) do not come here: they commit with it,
 * one by one, or, gathered in a `SendBatch` (`SendOptions.batch`), all with the writer's one
 * statement run inside that transaction (`writeWithin`).
 */
import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { columnTypes, insertRowsStatement, rowsParams, withStatements, type ColumnTypes, type RowSet } from '../../platform/db/rowsets.ts';
import { EVENT_COLUMNS, eventRow, type EventInput } from '../../platform/events/events.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow, type UsageInput } from '../../platform/usage/usage.ts';
import type { Transaction } from 'kysely';
import type { EntityManager } from '@mikro-orm/postgresql';
import { prepared, sqlQuery } from '../../platform/db/sql.ts';
import { genericArrays } from '../../platform/db/plans.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import { Message } from './messaging.entities.ts';
import { DELIVERY_INSERT_ROWS, DELIVERY_INSERT_TYPES, deliveriesInsert, deliveryRow, type DeliveryQueue, type HandedDelivery } from './messaging.queue.ts';

/** The delivery queue's hand-over of rows inserted already claimed (messaging.queue.ts `handOffLease`, `handOff`). */
export type DeliveryHandOff = Pick<DeliveryQueue, 'handOffLease' | 'handOff'>;

export type SenderQuery = { tenant: TenantRef; channel: Channel; address: string | null };

/** The batched sender lookup (a named statement on one generic plan: platform/db/plans.ts). Exported for test/prepared-plans.test.ts. */
export const SENDER_LOOKUP_SQL = `select r.idx, s.address
             from unnest(${genericArrays(['$1::text[]', '$2::text[]', '$3::text[]', '$4::text[]'])}) with ordinality as r(org, mode, channel, address, idx)
             left join lateral (
               select address from message_senders m
               where m.organization_id = r.org and m.mode = r.mode and m.channel = r.channel and (r.address is null or m.address = r.address)
               order by m.is_default desc, m.id asc limit 1
             ) s on true`;

/** Finds, for each query, the owned sender with that address, or (address null) the default sender. */
export class SenderLookup {
  readonly #pool: Pool;
  readonly #batcher: Batcher<SenderQuery, string | null>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#batcher = new Batcher((queries) => this.#run(queries), { maxInFlight: 1 });
  }

  find(query: SenderQuery): Promise<string | null> {
    return this.#batcher.submit(query);
  }

  async #run(queries: SenderQuery[]): Promise<(string | null)[]> {
    const { rows } = await this.#pool.query<{ idx: string; address: string | null }>({
      name: 'messaging_sender_lookup',
      text: SENDER_LOOKUP_SQL,
      values: [
        queries.map((q) => q.tenant.organizationId), queries.map((q) => q.tenant.mode),
        queries.map((q) => q.channel), queries.map((q) => q.address),
      ],
    });
    const found = new Map(rows.map((r) => [Number(r.idx), r.address]));
    return queries.map((_, i) => found.get(i + 1) ?? null);
  }
}

/** The messages table's columns and the entity properties they hold, from the entity's metadata (so SQL follows the schema). */
function messageColumns(orm: MikroORM): { property: string; column: string }[] {
  return Object.values(orm.getMetadata().get(Message).properties)
    .filter((p) => p.persist !== false && p.fieldNames?.length === 1)
    .map((p) => ({ property: p.name, column: p.fieldNames[0]! }));
}

/**
 * Reads messages by id for the delivery pipeline's jobs (deliver, status reports): concurrent
 * reads share one statement and skip the ORM's unit of work (the jobs only read, then change
 * status through TransitionWriter). Rows come back as plain Message objects (pg parses jsonb and
 * timestamptz); callers check the tenant.
 */
export class MessageReader {
  readonly #pool: Pool;
  readonly #columns: { property: string; column: string }[];
  readonly #batcher: Batcher<string, Message | null>;

  constructor(deps: { orm: MikroORM; pool: Pool }) {
    this.#pool = deps.pool;
    this.#columns = messageColumns(deps.orm);
    this.#batcher = new Batcher((ids) => this.#run(ids), { maxInFlight: 2 });
  }

  byId(id: string): Promise<Message | null> {
    return this.#batcher.submit(id);
  }

  async #run(ids: string[]): Promise<(Message | null)[]> {
    const select = this.#columns.map((c) => `"${c.column}"`).join(', ');
    const { rows } = await this.#pool.query<Record<string, unknown>>({
      name: 'messaging_read_by_id',
      text: `select ${select} from messages where id = any($1::text[])`,
      values: [[...new Set(ids)]],
    });
    const byId = new Map(rows.map((row) => [row.id as string, Object.fromEntries(this.#columns.map((c) => [c.property, row[c.column]])) as unknown as Message]));
    return ids.map((id) => byId.get(id) ?? null);
  }
}

export type Acceptance = {
  scope: Scope;
  message: Message;
  event: EventInput;
  usage: UsageInput;
  /** Live-mode price to reserve from the credit balance in the same transaction (ledger key: the message id). */
  charge?: SendCharge;
};

/**
 * The billing context's reservation CTE (CreditsPort.sendReservations): it joins the batch's one
 * statement, so reservations and messages commit together. A batch the balance does not cover
 * fails as a whole and is retried item by item, so only the sends it does not cover fail.
 */
/**
 * What a live send would cost, and the units it takes from the plan's included messages (1 per
 * message, 1 per email recipient): a send the pool still covers is not charged.
 */
export type SendCharge = { amount: number; key: string; units: number };

export type Reservations = {
  cte(firstParam: number): string;
  params(items: readonly { organizationId: string; mode: string; plan: Plan; amount: number; key: string; units: number }[], now: Date): unknown[];
  isRefusal(e: unknown): boolean;
  refusal(scope: Scope, amount: number): Promise<Error>;
  /** After the commit: enqueues the auto-reload of any account the debit marked (billing's SendReservations.committed). */
  committed(tenants: readonly Scope[]): void;
};

/**
 * Sends gathered inside a caller's transaction (a campaign batch): each send is checked and
 * rendered as any send is, but nothing is written until `commit`, which writes the ones the caller
 * keeps (messages, events, usage, delivery rows) with one statement of that transaction. Charged
 * sends (live mode with billing) are not gathered: they are written one by one as before.
 */
export class SendBatch {
  readonly #writer: AcceptanceWriter;
  readonly #items = new Map<string, Acceptance>();
  readonly #senders = new Map<string, Promise<string>>();
  /** Delivery rows `commit` wrote already claimed for this instance's loops, handed over by `committed`. */
  #handed: HandedDelivery[] = [];

  constructor(writer: AcceptanceWriter) {
    this.#writer = writer;
  }

  add(acceptance: Acceptance): void {
    this.#items.set(acceptance.message.id, acceptance);
  }

  /** The sender of (channel, from), looked up once per batch. */
  sender(key: string, resolve: () => Promise<string>): Promise<string> {
    let found = this.#senders.get(key);
    if (!found) {
      found = resolve();
      this.#senders.set(key, found);
      found.catch(() => this.#senders.delete(key));
    }
    return found;
  }

  /**
   * Writes the gathered messages with ids in `keep` (all when omitted) inside `tx`'s transaction.
   * Call `committed` once that transaction committed: their deliveries go to this instance's loops.
   */
  async commit(tx: EntityManager, keep?: ReadonlySet<string>): Promise<void> {
    const trx = tx.getTransactionContext<Transaction<unknown>>();
    if (!trx) throw new Error('a send batch commits inside a transaction');
    const items = [...this.#items.values()].filter((a) => !keep || keep.has(a.message.id));
    this.#items.clear();
    this.#handed = await this.#writer.writeWithin(trx, items);
  }

  /**
   * The caller's transaction committed: the messages' delivery rows, inserted already claimed when
   * this instance runs the delivery loops, are handed to them (no claim statement). Not called (a
   * rollback, a crash), they are due again once their lease lapses.
   */
  committed(): void {
    const handed = this.#handed;
    this.#handed = [];
    this.#writer.handOff(handed);
  }
}

export class AcceptanceWriter {
  readonly #pool: Pool;
  readonly #columns: { property: string; column: string }[];
  readonly #batcher: Batcher<Acceptance, true>;
  readonly #reservations: () => Reservations | undefined;
  readonly #deliveries: DeliveryHandOff | undefined;

  constructor(deps: { orm: MikroORM; pool: Pool; reservations?: () => Reservations | undefined; deliveries?: DeliveryHandOff }) {
    this.#pool = deps.pool;
    this.#reservations = deps.reservations ?? (() => undefined);
    this.#deliveries = deps.deliveries;
    this.#columns = messageColumns(deps.orm);
    // One batch at a time: while it commits, the next one grows (bigger batches cost less per message).
    this.#batcher = new Batcher((items) => this.#write(items), { maxInFlight: 1, isolate: true, maxBatch: 200 });
  }

  /** Resolves once the message, its event, usage entry and delivery row are committed. */
  accept(acceptance: Acceptance): Promise<true> {
    return this.#batcher.submit(acceptance);
  }

  /**
   * One statement: the messages, events, usage entries (and reservations) as data-modifying CTEs
   * ahead of the insert of the delivery rows. Its text is the same for every batch, so it is a
   * named prepared statement, parsed and planned once per connection.
   */
  async #write(items: Acceptance[]): Promise<true[]> {
    const { statement, reservations, handed } = await this.#statement(items);
    try {
      await this.#pool.query(statement);
    } catch (e) {
      // Alone (or retried alone), a refused send learns why: 402 INSUFFICIENT_CREDITS or 403 SUBSCRIPTION_INACTIVE.
      if (reservations?.isRefusal(e) && items.length === 1) throw await reservations.refusal(items[0]!.scope, items[0]!.charge!.amount);
      throw e;
    }
    this.handOff(handed);
    reservations?.committed(items.filter((item) => item.charge).map((item) => item.scope));
    return items.map(() => true as const);
  }

  /** Committed delivery rows that were inserted already claimed: to this instance's loops. */
  handOff(rows: readonly HandedDelivery[]): void {
    if (rows.length > 0) this.#deliveries?.handOff(rows);
  }

  /**
   * Writes `items` with the same one statement inside the caller's transaction (`SendBatch`: a
   * campaign batch's messages commit with its recipients). Items here carry no charge.
   */
  async writeWithin(trx: Transaction<unknown>, items: readonly Acceptance[]): Promise<HandedDelivery[]> {
    if (items.length === 0) return [];
    if (items.some((item) => item.charge)) throw new Error('a charged send cannot join a send batch');
    const { statement, handed } = await this.#statement(items);
    // The same text every batch: a prepared statement on the caller's connection too (sql.ts).
    await sqlQuery(trx, prepared(statement.text), statement.values);
    return handed;
  }

  async #statement(items: readonly Acceptance[]): Promise<{ statement: { name: string; text: string; values: unknown[] }; reservations: Reservations | undefined; handed: HandedDelivery[] }> {
    const shape = await (this.#shape ??= this.#loadShape().catch((e: unknown) => {
      this.#shape = undefined; // read again by the next batch
      throw e;
    }));
    const [messages, events, usage, deliveries] = shape.sets;
    let param = 1;
    const cte = (name: string, set: RowSet, types: ColumnTypes) => {
      const sql = insertRowsStatement(set, types, param);
      param += set.columns.length;
      return { name, sql };
    };
    const charged = items.filter((item) => item.charge);
    // Claimed for this instance's loops when they run here and have room (handed over after the commit).
    const rows = items.map((item) => deliveryRow(item.scope, item.message.id));
    const lease = this.#deliveries?.handOffLease(items.length) ?? 0;
    const reservations = charged.length > 0 ? this.#reservations() : undefined;
    const ctes = [
      cte('accepted_messages', messages, shape.types[0]),
      cte('accepted_events', events, shape.types[1]),
      cte('accepted_usage', usage, shape.types[2]),
    ];
    let reservationParams: unknown[] = [];
    if (reservations) {
      ctes.push({ name: 'accepted_charges', sql: reservations.cte(param) });
      reservationParams = reservations.params(charged.map((item) => ({
        organizationId: item.scope.organizationId, mode: item.scope.mode, plan: item.scope.plan, amount: item.charge!.amount, key: item.charge!.key, units: item.charge!.units,
      })), items[0]!.message.createdAt);
      param += reservationParams.length;
    }
    let text = withStatements(ctes, deliveriesInsert(param));
    if (text === this.#text) text = this.#text; // the string already hashed (and named)
    else {
      this.#text = text;
      this.#statementName = `messaging_accept_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    }
    const statement = {
      name: this.#statementName,
      text,
      values: [
        ...rowsParams(messages, shape.types[0], items.map((item) => {
          const m = item.message as unknown as Record<string, unknown>;
          const row: Record<string, unknown> = {};
          for (const c of this.#columns) row[c.column] = m[c.property];
          return row;
        })),
        ...rowsParams(events, shape.types[1], items.map((item) => eventRow(item.scope, item.event, item.message.createdAt))),
        ...rowsParams(usage, shape.types[2], items.map((item) => usageRow(item.scope, item.usage, item.message.createdAt))),
        ...reservationParams,
        ...rowsParams(deliveries, shape.types[3], rows.map((row) => ({ ...row, lease }))),
      ],
    };
    return { statement, reservations, handed: lease > 0 ? rows as unknown as HandedDelivery[] : [] };
  }

  /** The four row sets and their tables' column types (read from the catalog once per process). */
  async #loadShape(): Promise<AcceptanceShape> {
    const sets: AcceptanceShape['sets'] = [
      { table: 'messages', columns: this.#columns.map((c) => c.column) },
      { table: 'events', columns: EVENT_COLUMNS },
      { table: 'usage_entries', columns: USAGE_COLUMNS, onConflict: USAGE_ON_CONFLICT },
      DELIVERY_INSERT_ROWS,
    ];
    const query = (text: string, values: unknown[]) => this.#pool.query<{ name: string; type: string }>(text, values);
    const [m, e, u] = await Promise.all(sets.slice(0, 3).map((set) => columnTypes(query, set.table)));
    return { sets, types: [m!, e!, u!, DELIVERY_INSERT_TYPES] };
  }

  #shape: Promise<AcceptanceShape> | undefined;
  #text = '';
  #statementName = '';
}

type AcceptanceShape = { sets: [RowSet, RowSet, RowSet, RowSet]; types: [ColumnTypes, ColumnTypes, ColumnTypes, ColumnTypes] };
