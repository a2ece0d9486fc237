/**
 * The batching every context's HIPAA housekeeping shares (messaging, agents, voice, …), safe with
 * several instances and idempotent: rows are locked with `for update` (not skipped, so a row a
 * concurrent writer holds is waited for rather than left behind), and each batch repeats until one
 * comes back short.
 * - `purge`: for every organization in HIPAA mode, statements that delete content older than its
 *   retention period (parameters: $1 organization, $2 cut-off, $3 now, $4 batch size);
 * - `backfill`: for every organization whose rows of a table predate its HIPAA mode, a batch
 *   function that seals them in one transaction (then the table is marked done for it).
 */
import type { Pool, PoolClient } from 'pg';
import type { Clock } from './clock.ts';
import type { JobRegistry } from './jobs/jobs.ts';
import type { PhiCodec, PhiPort } from './phi.ts';

export type BackfillBatch = (client: PoolClient, at: {
  organizationId: string; until: Date; limit: number; codec: PhiCodec;
  /** A codec that also opens these sealed values (rows partly sealed already, perhaps under a newer key version). */
  codecFor(sealed: readonly (string | null | undefined)[]): Promise<PhiCodec>;
}) => Promise<{ picked: number; changed: number }>;

export class PhiHousekeeping {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #phi: () => PhiPort | undefined;
  readonly batchSize: number;

  constructor(deps: { pool: Pool; clock: Clock; phi: () => PhiPort | undefined; batchSize: number }) {
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#phi = deps.phi;
    this.batchSize = deps.batchSize;
  }

  /** Runs each statement batch after batch for every organization in HIPAA mode; returns the rows purged. */
  async purge(statements: readonly string[]): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, cutoff } of await port.retention()) {
      const args = [organizationId, cutoff, this.#clock.now(), this.batchSize];
      for (const sql of statements) {
        for (;;) {
          const n = (await this.#pool.query(sql, args)).rowCount ?? 0;
          total += n;
          if (n < this.batchSize) break;
        }
      }
    }
    return total;
  }

  /** Seals `table`'s rows stored before each organization's HIPAA mode, `batch` by `batch`; returns the rows changed. */
  async backfill(table: string, batch: BackfillBatch): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, until } of await port.backfillPending(table)) {
      const codec = await port.codec(organizationId);
      for (;;) {
        const codecFor = (sealed: readonly (string | null | undefined)[]) => port.codec(organizationId, sealed);
        const { picked, changed } = await this.#transaction((client) => batch(client, { organizationId, until, limit: this.batchSize, codec, codecFor }));
        total += changed;
        if (picked < this.batchSize) break;
      }
      await port.backfillDone(organizationId, table, until);
    }
    return total;
  }

  async #transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    try {
      await client.query('begin');
      const result = await work(client);
      await client.query('commit');
      return result;
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }
}

/**
 * What a context's HIPAA housekeeping class extends (messaging, contacts, campaigns, agents, voice,
 * flows): it holds the shared loop; the context adds its `sealBackfill` and, when it keeps content
 * past which retention applies, `purgeExpired`.
 */
export abstract class ContextHousekeeping {
  protected readonly housekeeping: PhiHousekeeping;

  constructor(housekeeping: PhiHousekeeping) {
    this.housekeeping = housekeeping;
  }

  /** Seals the context's rows stored before each organization's HIPAA mode; returns how many. */
  abstract sealBackfill(): Promise<number>;
}

/**
 * A context's HIPAA housekeeping jobs, named after it: `<context>.phi-backfill` (every minute) and,
 * when it purges, `<context>.phi-retention` (daily at `retentionCron`, UTC); `what` names the
 * content in their log lines.
 */
export function registerPhiHousekeeping(registry: JobRegistry, context: string, what: string,
  target: ContextHousekeeping & { purgeExpired?(): Promise<number> }, retentionCron = '23 4 * * *'): void {
  if (target.purgeExpired) {
    registry.register({
      name: `${context}.phi-retention`,
      tenant: false,
      schedule: retentionCron,
      handler: async (ctx) => {
        const purged = await target.purgeExpired!();
        if (purged > 0) ctx.log.info({ purged }, `${what} past HIPAA retention purged`);
      },
    });
  }
  registry.register({
    name: `${context}.phi-backfill`,
    tenant: false,
    schedule: '* * * * *',
    handler: async (ctx) => {
      const sealed = await target.sealBackfill();
      if (sealed > 0) ctx.log.info({ sealed }, `${what} stored before HIPAA mode sealed`);
    },
  });
}
