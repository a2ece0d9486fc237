/**
 * Pacing by 10DLC throughput: a GCRA (generic cell rate algorithm) whose state is one row per
 * sender in PostgreSQL (`send_pacing.tat`, the theoretical arrival time of the next message), so
 * every instance, every campaign and every API send from the same number share one schedule
 * (campaigns reserve a batch's slots; messaging's delivery job reserves one for an API send). Reserving
 * `n` messages is one upsert: the reservation starts at max(tat, now) and moves tat on by
 * n × emission interval; message i of it may leave at start + i × interval. Callers turn that
 * into pg-boss `startAfter`s. No burst tolerance: the rate is strict.
 */
import type { EntityManager } from '@mikro-orm/postgresql';

export type Reservation = { start: Date; intervalMs: number };

/** Reserves `count` send slots on `key` at `perSecond`, inside the caller's transaction. */
export async function reserveSlots(tx: EntityManager, key: string, count: number, perSecond: number, now: Date): Promise<Reservation> {
  const intervalMs = 1000 / perSecond;
  const span = count * intervalMs;
  const rows = await tx.getConnection().execute<{ start: string | Date }[]>(
    `insert into send_pacing (key, tat) values (?, ?::timestamptz + make_interval(secs => ?))
     on conflict (key) do update set tat = greatest(send_pacing.tat, ?::timestamptz) + make_interval(secs => ?)
     returning tat - make_interval(secs => ?) as start`,
    [key, now, span / 1000, now, span / 1000, span / 1000], 'all', tx.getTransactionContext(),
  );
  return { start: new Date(rows[0]!.start), intervalMs };
}

/** The pacing key of a sender: per organization, mode, channel and sender address. */
export function pacingKey(tenant: { organizationId: string; mode: string }, channel: string, from: string | null): string {
  return `${tenant.organizationId}:${tenant.mode}:${channel}:${from ?? 'default'}`;
}
