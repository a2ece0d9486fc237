/**
 * The sandbox provider's delivery reports as rows of `messaging_sandbox_reports` (message, status,
 * due_at, report) instead of one pg-boss job each (a job is inserted, fetched, completed and
 * archived in statements of its own: with the delivery job, two per message). The sandbox schedules
 * a message's reports when it accepts the send, `on conflict do nothing`, so a repeated send (a
 * delivery job that ran twice) schedules nothing twice. The same shape as voice's sandbox timeline
 * (voice/sandbox/timeline.ts).
 *
 * Each instance running the workers has one ticker: one statement claims every due row (up to a
 * batch, `for update skip locked`, so instances share them) by moving its `due_at` a lease ahead
 * and counting the attempt; the reports are applied together through the same code as a real
 * provider's callback (MessageDelivery.applyStatusReport: batched reads and batched forward-only
 * transitions), then one statement deletes the applied rows and makes the others due again. A
 * report applied twice changes nothing (status changes only move forward, and a live send's
 * reservation is settled only by the change that applied), so a crash between the apply and the
 * delete only repeats a no-op: exactly once in effect. A crash after the claim leaves the row, due
 * again when the lease lapses. A report that came before the send was recorded (ReportTooEarly) is
 * due again after a second, as its job was; a failure after RETRY_MS × attempts; either is dropped
 * (logged) after MAX_ATTEMPTS. The ticker looks every TICK_MS, and at once when this instance
 * scheduled a report due sooner. With tracing on, a row keeps the `traceparent` of the send that
 * scheduled it, and its report is applied in a span continuing that trace (as its job's was).
 *
 * An instance whose ticker runs stores the reports it schedules already claimed for itself
 * (attempts 1, due only after the delay and a lease) and keeps them in memory (at most HANDED_MAX):
 * the ticker applies them when due without a claim (at most half a batch of them before the
 * table's due rows, then more to fill the batch). A crash leaves their rows due once the lease lapses; one such report applied before
 * its send was recorded is tried again from memory shortly after (its row still claimed).
 */
import type { Pool } from 'pg';
import type { Logger } from '../../platform/logger.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { DueTicker, settleDue, type DueTable } from '../../platform/jobs/dueTicker.ts';
import { asError } from '../../platform/errors.ts';
import { contextOf, currentTraceparent, SpanKind, tracingEnabled, withSpan } from '../../platform/tracing.ts';
import type { ReportSink, ReportedStatus, StatusReport } from '../../providers/messaging/types.ts';
import { ReportTooEarly } from './messaging.delivery.ts';

type Report = Omit<StatusReport, 'at'>;
/** A stored report; `traceparent` (tracing on): the send that scheduled it, so its status change continues that trace. */
type StoredReport = Report & { traceparent?: string };
type Claimed = { message_id: string; status: ReportedStatus; attempts: number; report: StoredReport };

/** A claimed row is due again after this when its instance did not finish it. */
const LEASE_SECONDS = 15;
/** A report before its send was recorded is due again after this (the report job's retry delay). */
const TOO_EARLY_MS = 1000;
/** A report of this instance's (handed) before its send was recorded is applied again from memory after this. */
const TOO_EARLY_LOCAL_MS = 100;
/** A failed report is due again after this × its attempts. */
const RETRY_MS = 200;
/** The report job's attempts (its retryLimit 10, plus the first). */
const MAX_ATTEMPTS = 11;
/** How often the ticker looks when nothing of this instance's falls due sooner (rows of other instances, after a crash). */
const TICK_MS = 500;
/** Reports an instance keeps in memory at most (stored claimed by `schedule`); past it they are stored due for any ticker. */
const HANDED_MAX = 2048;

export const REPORTS_TABLE = 'messaging_sandbox_reports';

/** The sandbox reports' table as `settleDue` sees it: finished reports deleted, the others due again. */
export const REPORTS_DUE: DueTable<Claimed> = {
  statement: 'messaging_reports_settle',
  table: REPORTS_TABLE,
  keys: [{ column: 'message_id', type: 'text' }, { column: 'status', type: 'text' }],
  key: (r) => [r.message_id, r.status],
};

/** The ticker's claim of up to $1 due reports, leased for $2 seconds (its locking subquery runs once: see CLAIM_SQL in messaging.queue.ts). */
export const REPORTS_CLAIM_SQL = `update messaging_sandbox_reports e set due_at = now() + make_interval(secs => $2), attempts = e.attempts + 1
                  where e.ctid = any(array(select ctid from messaging_sandbox_reports where due_at <= now() order by due_at limit $1 for update skip locked))
              returning e.message_id, e.status, e.attempts, e.report`;

export type ReportTarget = {
  /** Applies one report (batched with the others of the moment); throws ReportTooEarly before the send is recorded. */
  applyStatusReport(report: StatusReport): Promise<boolean>;
};

export class SandboxReportTimeline extends DueTicker implements ReportSink {
  readonly #pool: Pool;
  readonly #log: Logger;
  readonly #now: () => Date;
  readonly #batch: number;
  #target: ReportTarget | undefined;
  /**
   * Reports this instance stored already claimed (`schedule` while the ticker runs): applied from
   * here when due, without a claim statement. Their rows are claimed for the delay and a lease
   * beyond it, so after a crash they come due again through the table.
   */
  readonly #handed: { row: Claimed; due: number }[] = [];
  /**
   * Stores the reports: `lease` 0, due after the delay for any ticker; with a lease (seconds),
   * claimed for this instance (attempts 1, due again only after the delay and the lease). Answers,
   * per item, whether its row was inserted claimed (a report stored before is not inserted again).
   */
  readonly #inserts = new Batcher<{ report: StoredReport; delayMs: number; lease: number }, boolean>(async (items) => {
    const { rows } = await this.#pool.query<{ message_id: string; status: string }>({
      name: 'messaging_reports_schedule_claimed',
      text: `insert into messaging_sandbox_reports (message_id, status, due_at, attempts, report)
             select r.message_id, r.status, now() + make_interval(secs => r.delay_ms / 1000.0 + r.lease), case when r.lease > 0 then 1 else 0 end, r.report
               from unnest($1::text[], $2::text[], $3::int[], $4::jsonb[], $5::int[]) as r(message_id, status, delay_ms, report, lease)
             on conflict (message_id, status) do nothing
             returning message_id, status`,
      values: [
        items.map((i) => i.report.messageId), items.map((i) => i.report.status),
        items.map((i) => Math.max(0, Math.round(i.delayMs))), items.map((i) => JSON.stringify(i.report)), items.map((i) => i.lease),
      ],
    });
    const inserted = new Set(rows.map((r) => `${r.message_id}\n${r.status}`));
    // The first of two equal items got the row.
    return items.map((i) => i.lease > 0 && inserted.delete(`${i.report.messageId}\n${i.report.status}`));
  }, { maxInFlight: 2, isolate: true });

  constructor(deps: { pool: Pool; log: Logger; now: () => Date; batch?: number; tickMs?: number }) {
    super({ batch: deps.batch ?? 512, tickMs: deps.tickMs ?? TICK_MS, log: deps.log, name: 'messaging sandbox reports' });
    this.#pool = deps.pool;
    this.#log = deps.log;
    this.#now = deps.now;
    this.#batch = deps.batch ?? 512;
  }

  /** What applies the reports (set once it exists). */
  bind(target: ReportTarget): void {
    this.#target = target;
  }

  /**
   * The sandbox provider's sink: the report is stored (once per message and status) before this
   * resolves. While this instance's ticker runs and holds fewer than HANDED_MAX of them, it is
   * stored claimed for this ticker and applied from memory when due (no claim statement).
   */
  async schedule(report: Report, delayMs: number): Promise<void> {
    const traceparent = tracingEnabled() ? currentTraceparent() : undefined;
    const stored: StoredReport = traceparent ? { ...report, traceparent } : report;
    const lease = this.running && this.#target && this.#handed.length < HANDED_MAX ? LEASE_SECONDS : 0;
    const claimed = await this.#inserts.submit({ report: stored, delayMs, lease });
    const due = Date.now() + delayMs;
    if (claimed) this.#handed.push({ row: { message_id: report.messageId, status: report.status, attempts: 1, report: stored }, due });
    this.wake(due);
  }

  /**
   * The handed reports due now (up to `n`). One left unapplied for more than half its lease past
   * its due time is dropped here: its row comes due again through the table.
   */
  #takeHanded(n: number): Claimed[] {
    const now = Date.now();
    const stale = now - (LEASE_SECONDS * 1000) / 2;
    const rows: Claimed[] = [];
    let kept = 0;
    for (const h of this.#handed) {
      if (h.due < stale) continue;
      if (h.due <= now && rows.length < n) rows.push(h.row);
      else this.#handed[kept++] = h;
    }
    this.#handed.length = kept;
    return rows;
  }

  override async stop(): Promise<void> {
    await super.stop();
    // Handed reports not applied yet come due again through the table once their lease lapses.
    this.#handed.length = 0;
  }

  /** Claims the due reports and applies them; returns how many it claimed. */
  async tick(): Promise<number> {
    const target = this.#target;
    if (!target) return 0;
    // This instance's own reports come claimed already: at most half a batch of them before the
    // table's due rows (other instances', retries), then more of them to fill the batch.
    const first = this.#takeHanded(Math.ceil(this.#batch / 2));
    let rows = first;
    try {
      const claimed = await this.#pool.query<Claimed>({ name: 'messaging_reports_claim', text: REPORTS_CLAIM_SQL, values: [this.#batch - rows.length, LEASE_SECONDS] });
      rows = [...rows, ...claimed.rows];
    } catch (e) {
      if (rows.length === 0) throw e;
      this.#log.warn({ err: e }, 'messaging sandbox reports: claim failed');
    }
    const more = rows.length < this.#batch ? this.#takeHanded(this.#batch - rows.length) : [];
    rows = [...rows, ...more];
    const local = new Set([...first, ...more]);
    const next = this.#handed.reduce((m, h) => Math.min(m, h.due), Number.POSITIVE_INFINITY);
    if (next < Number.POSITIVE_INFINITY) this.wake(next);
    if (rows.length === 0) return 0;
    const at = this.#now();
    const apply = ({ traceparent, ...report }: StoredReport): Promise<unknown> => (traceparent
      ? withSpan('messaging.sandbox-report', { kind: SpanKind.CONSUMER, parent: contextOf(traceparent), attributes: { 'app.status': report.status } }, () => target.applyStatusReport({ ...report, at }))
      : target.applyStatusReport({ ...report, at }));
    const results = await Promise.all(rows.map((r) => apply(r.report).then(() => undefined, (e: unknown) => asError(e))));
    const done: Claimed[] = [];
    const retry: { row: Claimed; ms: number }[] = [];
    rows.forEach((row, i) => {
      const error = results[i];
      if (!error) {
        done.push(row);
      } else if (row.attempts >= MAX_ATTEMPTS) {
        this.#log.error({ err: error, message_id: row.message_id, status: row.status }, 'messaging sandbox reports: report dropped after repeated attempts');
        done.push(row);
      } else if (error instanceof ReportTooEarly && local.has(row)) {
        // Its send is being recorded (the report came at once): again from memory shortly, its row still claimed.
        const due = Date.now() + TOO_EARLY_LOCAL_MS;
        this.#handed.push({ row: { ...row, attempts: row.attempts + 1 }, due });
        this.wake(due);
      } else if (error instanceof ReportTooEarly) {
        retry.push({ row, ms: TOO_EARLY_MS });
      } else {
        this.#log.warn({ err: error, message_id: row.message_id, status: row.status, attempt: row.attempts }, 'messaging sandbox reports: report failed, due again');
        retry.push({ row, ms: RETRY_MS * row.attempts });
      }
    });
    await settleDue(this.#pool, REPORTS_DUE, done, retry, (at) => this.wake(at));
    return rows.length;
  }
}
