/**
 * What carrier connectors have sent, per message: the provider side of "send once". A delivery may
 * run twice (a crash after the send, a lease that lapsed) and may move from one connector to
 * another (failover), so before a connector submits anything it records the message as `sending`
 * under its own id; afterwards it records the outcome:
 *
 * | outcome                                         | record                  | a later attempt (any connector)         |
 * |-------------------------------------------------|-------------------------|-----------------------------------------|
 * | every part accepted                             | `sent`, the parts' ids  | answers the recorded send, sends nothing |
 * | nothing accepted (refused, throttled, link lost)| removed                 | sends, through any connector             |
 * | some parts accepted, the rest not yet           | `partial`, accepted ids | the same connector sends the missing parts; another refuses (pinned) |
 * | a part refused for good                         | `failed`                | refuses (the message failed)             |
 * | the process died between the record and the outcome | `sending` (stays)   | refuses: in doubt, never sent twice      |
 *
 * Delivery receipts name a part by its SMSC id: `receipt` marks the part final and answers the
 * message's outcome once it is decided (delivered when every part is, failed at the first part
 * that failed). PostgreSQL backs it in the app; memory backs unit tests.
 */
import type { Queryable } from './sendStore.ts';
import { Batcher } from '../../platform/db/batcher.ts';

export type CarrierSendBegin =
  | { kind: 'new' }
  /** A partial send by this connector: submit the parts without an id, with the same concatenation reference. */
  | { kind: 'resume'; ref: number; parts: (string | null)[] }
  | { kind: 'sent'; connectorId: string; providerMessageId: string }
  /** A partial send by another connector: only that one may finish it. */
  | { kind: 'pinned'; connectorId: string }
  /** An attempt died after recording `sending` (or the message failed): sending again could send twice. */
  | { kind: 'in_doubt'; connectorId: string };

export type ReceiptUpdate = {
  connectorId: string;
  /** The SMSC id as received and its other spellings. */
  smscIds: string[];
  outcome: 'delivered' | 'failed';
  errorCode: string | null;
};

/**
 * What a receipt decided. `status` is the message's outcome once its segments decide it: delivered
 * when every segment is, failed at the first that failed. A repeated receipt (its segment already
 * final) answers the outcome again, so a report whose first application failed (the SMSC repeats the
 * receipt when it is not acknowledged) is applied by the repeat; applying one twice changes nothing.
 */
export type ReceiptResult =
  | { kind: 'unknown' }
  | { kind: 'applied' | 'repeat'; messageId: string; providerMessageId: string; status?: 'delivered' | 'failed'; errorCode?: string };

export interface CarrierSendStore {
  /** Records `sending` for a new send (with its concatenation reference), or answers what was recorded before. */
  begin(messageId: string, connectorId: string, ref: number): Promise<CarrierSendBegin>;
  /** Every part was accepted: `sent`, with the parts' SMSC ids in order (the first is the message's provider id). */
  finish(messageId: string, connectorId: string, parts: string[]): Promise<void>;
  /** Some parts were accepted and the rest may still be sent (by this connector only). */
  partial(messageId: string, connectorId: string, parts: (string | null)[]): Promise<void>;
  /** Nothing was accepted: forget the send, any connector may send it. */
  release(messageId: string, connectorId: string): Promise<void>;
  /** A part was refused for good: the message fails, nothing is sent again. */
  failed(messageId: string, connectorId: string): Promise<void>;
  /** A final delivery receipt of one part. */
  receipt(update: ReceiptUpdate): Promise<ReceiptResult>;
  /** The message a connector's part id (its vendor's message id) belongs to, once the send is recorded. */
  messageOf(connectorId: string, providerMessageId: string): Promise<string | undefined>;
}

type Begin = { messageId: string; connectorId: string; ref: number };
type Finish = { messageId: string; connectorId: string; parts: string[] };
type Row = { message_id: string; connector_id: string; state: string; ref: number; parts: (string | null)[] | null };

/**
 * Over `carrier_sends` and `carrier_parts` (the app's migrations). Begins, finishes and receipts of
 * concurrent sends share one statement each (platform/db/batcher.ts).
 */
export class PgCarrierSendStore implements CarrierSendStore {
  readonly #db: Queryable;
  readonly #begins: Batcher<Begin, CarrierSendBegin>;
  readonly #finishes: Batcher<Finish, void>;
  readonly #receipts: Batcher<ReceiptUpdate, ReceiptResult>;

  constructor(db: Queryable) {
    this.#db = db;
    this.#begins = new Batcher((items) => this.#beginMany(items), { maxInFlight: 2, isolate: true });
    this.#finishes = new Batcher((items) => this.#finishMany(items), { maxInFlight: 2, isolate: true });
    this.#receipts = new Batcher((items) => this.#receiptMany(items), { maxInFlight: 2, isolate: true });
  }

  begin(messageId: string, connectorId: string, ref: number): Promise<CarrierSendBegin> {
    return this.#begins.submit({ messageId, connectorId, ref });
  }

  finish(messageId: string, connectorId: string, parts: string[]): Promise<void> {
    return this.#finishes.submit({ messageId, connectorId, parts });
  }

  async partial(messageId: string, connectorId: string, parts: (string | null)[]): Promise<void> {
    await this.#db.query(
      `update carrier_sends set state = 'partial', parts = $3::text[], updated_at = now() where message_id = $1 and connector_id = $2`,
      [messageId, connectorId, parts],
    );
  }

  async release(messageId: string, connectorId: string): Promise<void> {
    await this.#db.query(`delete from carrier_sends where message_id = $1 and connector_id = $2 and state = 'sending'`, [messageId, connectorId]);
  }

  async failed(messageId: string, connectorId: string): Promise<void> {
    await this.#db.query(`update carrier_sends set state = 'failed', updated_at = now() where message_id = $1 and connector_id = $2`, [messageId, connectorId]);
  }

  async messageOf(connectorId: string, providerMessageId: string): Promise<string | undefined> {
    const { rows } = await this.#db.query<{ message_id: string }>(
      'select message_id from carrier_parts where connector_id = $1 and smsc_message_id = $2 limit 1', [connectorId, providerMessageId]);
    return rows[0]?.message_id;
  }

  receipt(update: ReceiptUpdate): Promise<ReceiptResult> {
    return this.#receipts.submit(update);
  }

  async #beginMany(items: Begin[]): Promise<(CarrierSendBegin | Error)[]> {
    const inserted = await this.#db.query<{ message_id: string }>({
      name: 'carrier_sends_begin',
      text: `insert into carrier_sends (message_id, connector_id, state, ref)
             select * from unnest($1::text[], $2::text[], $3::text[], $4::int[])
             on conflict (message_id) do nothing returning message_id`,
      values: [items.map((i) => i.messageId), items.map((i) => i.connectorId), items.map(() => 'sending'), items.map((i) => i.ref)],
    });
    // The first item of each inserted id began it (a batch may hold one message twice); the others read what is there.
    const won = new Set(inserted.rows.map((r) => r.message_id));
    const firsts = new Set(items.filter((i) => won.delete(i.messageId)));
    const others = [...new Set(items.filter((i) => !firsts.has(i)).map((i) => i.messageId))];
    const existing = new Map<string, Row>();
    if (others.length > 0) {
      // A second statement: it sees rows a concurrent begin committed while the insert waited on their keys.
      const { rows } = await this.#db.query<Row>('select message_id, connector_id, state, ref, parts from carrier_sends where message_id = any($1::text[])', [others]);
      for (const r of rows) existing.set(r.message_id, r);
    }
    return items.map((i): CarrierSendBegin | Error => {
      if (firsts.has(i)) return { kind: 'new' };
      const row = existing.get(i.messageId);
      // Released between the insert and the read: the caller may try again.
      if (!row) return new Error(`carrier_sends: ${i.messageId} conflicted and was gone when read`);
      return beginFrom(row, i.connectorId);
    });
  }

  async #finishMany(items: Finish[]): Promise<(void | Error)[]> {
    const parts = items.flatMap((i) => i.parts.map((smscId, index) => ({ ...i, smscId, index })));
    await this.#db.query({
      name: 'carrier_sends_finish',
      text: `with s as (
               update carrier_sends c set state = 'sent', parts = f.parts::text[], pending = f.n, updated_at = now()
               from (select * from unnest($1::text[], $2::text[], $3::text[], $4::int[]) as f(message_id, connector_id, parts, n)) f
               where c.message_id = f.message_id and c.connector_id = f.connector_id
               returning c.message_id
             )
             insert into carrier_parts (connector_id, smsc_message_id, message_id, part)
             select p.connector_id, p.smsc_message_id, p.message_id, p.part
               from unnest($5::text[], $6::text[], $7::text[], $8::int[]) as p(connector_id, smsc_message_id, message_id, part)
             on conflict do nothing`,
      // Each message's parts as one text value: a Postgres array of arrays must be rectangular.
      values: [
        items.map((i) => i.messageId), items.map((i) => i.connectorId), items.map((i) => pgTextArray(i.parts)), items.map((i) => i.parts.length),
        parts.map((p) => p.connectorId), parts.map((p) => p.smscId), parts.map((p) => p.messageId), parts.map((p) => p.index + 1),
      ],
    });
    return items.map(() => undefined);
  }

  async #receiptMany(items: ReceiptUpdate[]): Promise<(ReceiptResult | Error)[]> {
    const flat = items.flatMap((u, ord) => u.smscIds.map((smscId) => ({ ord, smscId, u })));
    const { rows } = await this.#db.query<{ ord: number; message_id: string | null; applied: boolean; pending: number | null; failed_code: string | null; provider_message_id: string | null }>({
      name: 'carrier_parts_receipt',
      text: `with r as (
               select * from unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[]) as r(ord, connector_id, smsc_message_id, outcome, error_code)
             ), known as (
               select distinct on (r.ord) r.ord, p.message_id, c.pending, c.failed_code, c.parts[1] as provider_message_id from r
                 join carrier_parts p on p.connector_id = r.connector_id and p.smsc_message_id = r.smsc_message_id
                 join carrier_sends c on c.message_id = p.message_id
                order by r.ord
             ), p as (
               update carrier_parts p set outcome = r.outcome
                 from r where p.connector_id = r.connector_id and p.smsc_message_id = r.smsc_message_id and p.outcome is null
               returning p.message_id, r.ord, r.outcome, r.error_code
             ), s as (
               update carrier_sends c set pending = c.pending - x.n, failed_code = coalesce(c.failed_code, x.error_code), updated_at = now()
                 from (select message_id, count(*)::int as n, min(error_code) filter (where outcome = 'failed') as error_code from p group by message_id) x
                where c.message_id = x.message_id
               returning c.message_id, c.pending, c.failed_code, c.parts[1] as provider_message_id
             )
             select k.ord, k.message_id, (p.ord is not null) as applied, coalesce(s.pending, k.pending) as pending,
                    coalesce(s.failed_code, k.failed_code) as failed_code, coalesce(s.provider_message_id, k.provider_message_id) as provider_message_id
               from known k left join p on p.ord = k.ord left join s on s.message_id = k.message_id`,
      values: [flat.map((f) => f.ord), flat.map((f) => f.u.connectorId), flat.map((f) => f.smscId), flat.map((f) => f.u.outcome), flat.map((f) => f.u.errorCode)],
    });
    const byOrd = new Map(rows.map((r) => [r.ord, r]));
    const results = items.map((_u, ord): ReceiptResult => {
      const row = byOrd.get(ord);
      if (!row || !row.message_id || row.provider_message_id === null) return { kind: 'unknown' };
      return outcome(row.applied ? 'applied' : 'repeat', row.message_id, row.provider_message_id, row.pending ?? 0, row.failed_code);
    });
    // Receipts of one message applied in this statement all see its outcome: only the last reports it.
    const reported = new Set<string>();
    for (let i = results.length - 1; i >= 0; i--) {
      const r = results[i]!;
      if (r.kind !== 'applied' || !r.status) continue;
      if (reported.has(r.messageId)) results[i] = { kind: 'applied', messageId: r.messageId, providerMessageId: r.providerMessageId };
      reported.add(r.messageId);
    }
    return results;
  }
}

function outcome(kind: 'applied' | 'repeat', messageId: string, providerMessageId: string, pending: number, failedCode: string | null): ReceiptResult {
  const base = { kind, messageId, providerMessageId };
  if (failedCode !== null) return { ...base, status: 'failed', errorCode: failedCode };
  return pending <= 0 ? { ...base, status: 'delivered' } : base;
}

function beginFrom(row: Pick<Row, 'connector_id' | 'state' | 'ref' | 'parts'> & { provider?: string }, connectorId: string): CarrierSendBegin {
  if (row.state === 'sent') return { kind: 'sent', connectorId: row.connector_id, providerMessageId: row.parts?.[0] ?? '' };
  if (row.state === 'partial') {
    return row.connector_id === connectorId ? { kind: 'resume', ref: row.ref, parts: row.parts ?? [] } : { kind: 'pinned', connectorId: row.connector_id };
  }
  return { kind: 'in_doubt', connectorId: row.connector_id };
}

/** A PostgreSQL text[] literal (`{"a","b"}`) of strings. */
function pgTextArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}

type MemoryRow = { connectorId: string; state: string; ref: number; parts: (string | null)[] | null; pending: number; failedCode: string | null };

/** In-process store for unit tests. */
export class MemoryCarrierSendStore implements CarrierSendStore {
  readonly rows = new Map<string, MemoryRow>();
  readonly #parts = new Map<string, { messageId: string; outcome: string | null }>();

  async begin(messageId: string, connectorId: string, ref: number): Promise<CarrierSendBegin> {
    const row = this.rows.get(messageId);
    if (!row) {
      this.rows.set(messageId, { connectorId, state: 'sending', ref, parts: null, pending: 0, failedCode: null });
      return { kind: 'new' };
    }
    return beginFrom({ connector_id: row.connectorId, state: row.state, ref: row.ref, parts: row.parts }, connectorId);
  }

  async finish(messageId: string, connectorId: string, parts: string[]): Promise<void> {
    const row = this.rows.get(messageId);
    if (!row || row.connectorId !== connectorId) return;
    Object.assign(row, { state: 'sent', parts: [...parts], pending: parts.length });
    parts.forEach((id) => this.#parts.set(`${connectorId}\n${id}`, { messageId, outcome: null }));
  }

  async partial(messageId: string, connectorId: string, parts: (string | null)[]): Promise<void> {
    const row = this.rows.get(messageId);
    if (row?.connectorId === connectorId) Object.assign(row, { state: 'partial', parts: [...parts] });
  }

  async release(messageId: string, connectorId: string): Promise<void> {
    const row = this.rows.get(messageId);
    if (row?.connectorId === connectorId && row.state === 'sending') this.rows.delete(messageId);
  }

  async failed(messageId: string, connectorId: string): Promise<void> {
    const row = this.rows.get(messageId);
    if (row?.connectorId === connectorId) row.state = 'failed';
  }

  async messageOf(connectorId: string, providerMessageId: string): Promise<string | undefined> {
    return this.#parts.get(`${connectorId}\n${providerMessageId}`)?.messageId;
  }

  async receipt(update: ReceiptUpdate): Promise<ReceiptResult> {
    for (const id of update.smscIds) {
      const part = this.#parts.get(`${update.connectorId}\n${id}`);
      if (!part) continue;
      const row = this.rows.get(part.messageId)!;
      const repeat = part.outcome !== null;
      if (!repeat) {
        part.outcome = update.outcome;
        row.pending -= 1;
        if (update.outcome === 'failed') row.failedCode ??= update.errorCode;
      }
      return outcome(repeat ? 'repeat' : 'applied', part.messageId, row.parts![0]!, row.pending, row.failedCode);
    }
    return { kind: 'unknown' };
  }
}
