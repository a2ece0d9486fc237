/**
 * New calls written. A placed call's row, its `call.initiated` event and its placement (rows of
 * the sandbox timeline for a test call, else a placement job) are group-committed with other
 * requests' calls in one statement (platform/db/groupInsert.ts): `write`.
 *
 * Test calls written in their lookups' statement (`writeGated`): a POST /v1/voice/calls with a
 * test key and neither agent nor IVR is sent with its lookups (placing/lookups.ts `gate`): one
 * statement reads the consent of `to` and the organization's voice numbers, takes the request's
 * rate-limit slots when they are still queued, and writes the call (the same rows) only when the
 * take admitted it (or its admission came back already), the tenant holds `from` and `to` did not
 * opt out. The POST is then one round trip. A call the gate leaves out comes back with its
 * lookups: CallPlacing.create raises their errors in the documented order, or, once the request
 * is admitted, sends it through the gate again. Test mode only: a live call holds its quota and
 * credit first, which the gate does not.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { entityColumns, GroupInsert, type GroupInsertSet } from '../../../platform/db/groupInsert.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import { EVENT_COLUMNS, type eventRow } from '../../../platform/events/events.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { CallLookupReads, GatedAnswer, GatedCall } from '../placing/lookups.ts';
import { TIMELINE_COLUMNS, TIMELINE_TABLE } from '../sandbox/timeline.ts';
import { Call } from '../voice.entities.ts';

/** A call accepted by POST /v1/voice/calls, waiting for its group commit (`event`: its `call.initiated` row). */
export type NewCall = { scope: Scope; call: Call; event: ReturnType<typeof eventRow>; timeline?: Record<string, unknown>[] };

/** A test call sent with its lookups, written by their statement when they allow it. */
export type GatedNewCall = NewCall & { timeline: Record<string, unknown>[]; due: number[]; gate: GatedCall; metadata: Record<string, unknown> };

export class CallInserts {
  readonly #pool: Pool;
  readonly #lookups: Pick<CallLookupReads, 'gate'>;
  readonly #timeline: boolean;
  /** The rows of a new call: the call, its `call.initiated` event, its sandbox timeline rows. */
  readonly #sets: readonly GroupInsertSet<NewCall>[];
  readonly #accepted: GroupInsert<NewCall>;
  /** Made on first use (the consent port is resolved late); null: no gate (no sandbox timeline, or the lookups offer none). */
  #gated: GroupInsert<GatedNewCall, GatedAnswer> | null | undefined;

  /**
   * `placeJob`: the job that places a call without timeline rows; `timeline`: whether test calls'
   * placements are rows of the sandbox timeline (only then may a call be written with its lookups).
   */
  constructor(deps: { orm: MikroORM; pool: Pool; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; placeJob: string; timeline: boolean; lookups: Pick<CallLookupReads, 'gate'> }) {
    this.#pool = deps.pool;
    this.#lookups = deps.lookups;
    this.#timeline = deps.timeline;
    const columns = entityColumns(deps.orm.getMetadata().get(Call).properties);
    this.#sets = [
      // The call itself is the row: its properties hold the columns' values (no object per call).
      { table: 'calls', columns: columns.map((c) => c.column), properties: columns.map((c) => c.property), row: (n) => n.call },
      { table: 'events', columns: EVENT_COLUMNS, row: (n) => n.event },
      ...(deps.timeline ? [{ table: TIMELINE_TABLE, columns: TIMELINE_COLUMNS, rows: (n: NewCall) => n.timeline ?? [] }] : []),
    ];
    this.#accepted = new GroupInsert<NewCall>({
      pool: deps.pool, jobs: deps.jobs, name: 'voice_calls_accept',
      sets: this.#sets,
      job: { name: deps.placeJob, entry: (n) => (n.timeline ? null : { data: { callId: n.call.id }, scope: n.scope }) },
    });
  }

  /** Writes the call, its event and its placement, in one statement with other requests' calls. */
  async write(n: NewCall): Promise<void> {
    await this.#accepted.submit(n);
  }

  /** Whether a test call may be sent with its lookups (writeGated). */
  gated(): boolean {
    return this.#gatedGroup() !== null;
  }

  /** Writes the call with its lookups when the gate lets it through; the lookups it read either way. */
  writeGated(n: GatedNewCall): Promise<GatedAnswer> {
    const group = this.#gatedGroup();
    if (!group) throw new Error('no gate: a call is sent with its lookups only when gated() says so');
    return group.submit(n);
  }

  #gatedGroup(): GroupInsert<GatedNewCall, GatedAnswer> | null {
    if (this.#gated !== undefined) return this.#gated;
    const gate = this.#timeline ? this.#lookups.gate<GatedNewCall>((n) => n.gate) : null;
    this.#gated = gate ? new GroupInsert<GatedNewCall, GatedAnswer>({ pool: this.#pool, name: 'voice_calls_gated', sets: this.#sets, gate }) : null;
    return this.#gated;
  }
}
