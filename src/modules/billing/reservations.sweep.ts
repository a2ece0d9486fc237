/**
 * The stale-reservation sweep (`billing.stale-reservation-sweep`, every minute): a credit
 * reservation is settled by the process that made it (a delivery job, an agent turn), and one that
 * died between reserving and settling, or never reached its settlement, would hold the money
 * forever. The sweep settles such reservations the way their owner says, through the ordinary
 * capture/release path (ledger entry and balance in one statement, once per reservation).
 *
 * 1. Scan. The ledger is read once, in id order (ids sort by creation time), up to the entries
 *    older than the bound (BILLING_STALE_RESERVATION_SECONDS); `billing_sweeps` keeps how far. A
 *    reservation of a known owner still open when read is put on `credit_reservation_watch`.
 * 2. Settle. Watched reservations that are due are locked (`for update`, never SKIP LOCKED), their
 *    owners asked (ledger key `msg_…` → messaging's `messageCharges`, `agent_turn:…` → agents'
 *    `agentCharges`, `call:…` → voice's `callCharges`): `capture` or `release` settles one and drops it from the watch; null (still
 *    under way) asks again later, 1, 2, 4 … up to 60 minutes on. One settled meanwhile is dropped.
 *
 * Several instances: every batch takes the `billing_sweeps` row `for update` first, so sweeps scan
 * and decide one batch at a time. A concurrent settlement by the owner (a delivery report, a turn's
 * capture) meets the sweep's on the ledger's unique index on the settled reservation: the later
 * one waits for the earlier to commit and then does nothing, so there is exactly one capture or
 * release per reservation. The scan assumes a reservation's transaction commits within the bound.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { idFloor } from '../../platform/ids.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import type { Mode, TenantRef } from '../../platform/db/tenant.ts';
import type { ChargeOutcome, ReservationOwnerPort } from './billing.ports.ts';
import type { CreditsService } from './credits.service.ts';

export const STALE_RESERVATION_SWEEP_JOB = 'billing.stale-reservation-sweep';
const SWEEP = 'reservations';
/** Ledger entries read per scan statement, and scans per run (the rest waits for the next minute). */
const SCAN_BATCH = 5000;
const MAX_SCANS = 200;
/** Watched reservations settled per transaction, and such batches per run. */
const SETTLE_BATCH = 200;
const MAX_SETTLE_BATCHES = 50;
/** A reservation still under way is asked about again after 1, 2, 4 … minutes, at most this. */
const RECHECK_MAX_MS = 60 * 60_000;

/** Who answers for the reservations under ledger keys starting with `prefix`. */
export type ReservationOwner = { prefix: string; port: () => ReservationOwnerPort | undefined };

export type SweepResult = { scanned: number; watched: number; captured: number; released: number; pending: number };

type Watched = { reservation_id: string; organization_id: string; mode: Mode; key: string; checks: number; settled: boolean };

export class StaleReservationSweep {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #credits: CreditsService;
  readonly #owners: readonly ReservationOwner[];

  constructor(deps: { orm: MikroORM; clock: Clock; credits: CreditsService; owners: readonly ReservationOwner[] }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#credits = deps.credits;
    this.#owners = deps.owners;
  }

  /** One sweep: scans the ledger up to the bound, then settles what is due. Safe to run anywhere, any number of times at once. */
  async run(): Promise<SweepResult> {
    const result: SweepResult = { scanned: 0, watched: 0, captured: 0, released: 0, pending: 0 };
    const now = this.#clock.now();
    const cut = idFloor('cle', now.getTime() - this.#credits.staleReservationMs);
    for (let i = 0; i < MAX_SCANS; i++) {
      const { scanned, watched } = await this.#scan(cut, now);
      result.scanned += scanned;
      result.watched += watched;
      if (scanned < SCAN_BATCH) break;
    }
    for (let i = 0; i < MAX_SETTLE_BATCHES; i++) {
      if ((await this.#settleDue(now, result)) < SETTLE_BATCH) break;
    }
    return result;
  }

  #transaction<T>(work: (db: Transaction<unknown>) => Promise<T>): Promise<T> {
    return this.#orm.em.fork().transactional((tx) => work(tx.getTransactionContext<Transaction<unknown>>()!));
  }

  /** Reads the next ledger entries made before `cut`; puts the still-open reservations of known owners on the watch. */
  #scan(cut: string, now: Date): Promise<{ scanned: number; watched: number }> {
    const patterns = this.#owners.map((o) => `${o.prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    return this.#transaction(async (db) => {
      const [state] = await sqlQuery<{ swept_to: string }>(db, 'select swept_to from billing_sweeps where name = $1 for update', [SWEEP]);
      if (!state || state.swept_to >= cut) return { scanned: 0, watched: 0 };
      const [r] = await sqlQuery<{ scanned: number; watched: number }>(db, `
        with scanned as (
          select id, kind, organization_id, mode, idempotency_key, created_at from credit_ledger_entries
           where id > $1 and id < $2 order by id limit $3
        ), watched as (
          insert into credit_reservation_watch (reservation_id, organization_id, mode, key, reserved_at, next_check_at)
          select s.id, s.organization_id, s.mode, s.idempotency_key, s.created_at, $4 from scanned s
           where s.kind = 'reservation' and s.idempotency_key like any($5::text[])
             and not exists (select 1 from credit_ledger_entries x where x.reference_id = s.id and x.kind in ('capture', 'release'))
          on conflict do nothing
          returning 1
        ), moved as (
          update billing_sweeps b set swept_to = m.last from (select max(id) as last from scanned) m
           where b.name = $6 and m.last is not null
        )
        select (select count(*) from scanned)::int as scanned, (select count(*) from watched)::int as watched`,
      [state.swept_to, cut, SCAN_BATCH, now, patterns, SWEEP]);
      return r ?? { scanned: 0, watched: 0 };
    });
  }

  /**
   * One batch of due watched reservations: decided under the locks (the `billing_sweeps` row, then
   * the watched rows `for update`), then each settled in a statement of its own, so the sweep never
   * holds one account's row while it waits for another settlement. Returns how many it looked at.
   */
  async #settleDue(now: Date, result: SweepResult): Promise<number> {
    const decided = await this.#transaction(async (db) => {
      await sqlQuery(db, 'select 1 from billing_sweeps where name = $1 for update', [SWEEP]);
      const due = await sqlQuery<Watched>(db, `
        select w.reservation_id, w.organization_id, w.mode, w.key, w.checks,
               exists (select 1 from credit_ledger_entries x where x.reference_id = w.reservation_id and x.kind in ('capture', 'release')) as settled
          from credit_reservation_watch w where w.next_check_at <= $1
         order by w.next_check_at, w.reservation_id limit $2 for update of w`, [now, SETTLE_BATCH]);
      const outcomes = await this.#outcomes(due.filter((w) => !w.settled));
      const rows = due.map((w) => {
        const outcome = w.settled ? undefined : outcomes.get(w.reservation_id) ?? null;
        // Still under way: asked again later. Decided: leased for a minute while it is settled below
        // (a sweep that dies here leaves it to the next one).
        const wait = outcome === null ? Math.min(RECHECK_MAX_MS, 60_000 * 2 ** Math.min(w.checks, 16)) : 60_000;
        return { ...w, outcome, at: new Date(now.getTime() + wait) };
      });
      if (rows.length) {
        await sqlQuery(db, `update credit_reservation_watch w set checks = w.checks + 1, next_check_at = l.at
          from unnest($1::text[], $2::timestamptz[]) as l(id, at) where w.reservation_id = l.id`, [rows.map((r) => r.reservation_id), rows.map((r) => r.at)]);
      }
      return rows;
    });
    for (const w of decided) {
      if (w.outcome === null) {
        result.pending += 1;
        continue;
      }
      if (w.outcome) {
        // The ordinary capture/release: one statement, once per reservation (see CreditsService#settle).
        const tenant: TenantRef = { organizationId: w.organization_id, mode: w.mode };
        const settled = w.outcome === 'capture' ? await this.#credits.capture(tenant, w.reservation_id) : await this.#credits.release(tenant, w.reservation_id);
        if (settled) result[w.outcome === 'capture' ? 'captured' : 'released'] += 1;
      }
      await sqlQuery(sqlClient(this.#orm), 'delete from credit_reservation_watch where reservation_id = $1', [w.reservation_id]);
    }
    return decided.length;
  }

  /** Each owner's answer for its reservations (none installed for a key: null, asked again later). */
  async #outcomes(items: readonly Watched[]): Promise<Map<string, ChargeOutcome>> {
    const answers = new Map<string, ChargeOutcome>();
    for (const owner of this.#owners) {
      const mine = items.filter((w) => w.key.startsWith(owner.prefix));
      const port = owner.port();
      if (mine.length === 0 || !port) continue;
      const outcomes = await port.outcomes(mine.map((w) => ({ organizationId: w.organization_id, mode: w.mode, key: w.key })));
      if (outcomes.length !== mine.length) throw new Error(`reservation owner ${owner.prefix} answered ${outcomes.length} outcomes for ${mine.length} reservations`);
      mine.forEach((w, i) => answers.set(w.reservation_id, outcomes[i] ?? null));
    }
    return answers;
  }
}
