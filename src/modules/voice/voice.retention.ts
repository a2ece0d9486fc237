/**
 * HIPAA housekeeping of voice, in batches, idempotent and safe with several instances (rows are
 * locked with `for update`, not skipped, so a row a concurrent writer holds is waited for):
 * - retention: calls and voicemail messages older than the organization's retention period lose
 *   their recording (a call's recorded seconds; a voicemail message's audio, served no more) and
 *   their PHI (sealed metadata keys, transcriptions); the rows, addresses, statuses, durations and
 *   timestamps stay (`content_purged_at` set). The sandbox gateway keeps no media; a gateway that
 *   stores recordings deletes them through this job too.
 * - backfill: call metadata and transcriptions stored in clear before the mode was on are sealed.
 */
import type { Pool, PoolClient } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import type { PhiPort } from '../../platform/phi.ts';
import { sealCallMetadata, sealTranscription } from './voice.phi.ts';

export const VOICE_RETENTION_JOB = 'voice.phi-retention';
export const VOICE_BACKFILL_JOB = 'voice.phi-backfill';

export class VoiceRetention {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #phi: () => PhiPort | undefined;
  readonly #batch: number;

  constructor(deps: { pool: Pool; clock: Clock; phi: () => PhiPort | undefined; batchSize: number }) {
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#phi = deps.phi;
    this.#batch = deps.batchSize;
  }

  /** Purges recordings, PHI metadata and transcriptions past their organization's retention period; returns how many rows. */
  async purgeExpired(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, cutoff } of await port.retention()) {
      const args = [organizationId, cutoff, this.#clock.now(), this.#batch];
      // Unsealed metadata (stored before the mode, not yet backfilled) may hold PHI: it goes too.
      total += await this.#batches(`
        with picked as (
          select id from calls where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update calls c set recording_seconds = null, phi = null, content_purged_at = $3,
               metadata = case when c.phi is null then '{}'::jsonb else c.metadata end
          from picked where c.id = picked.id`, args);
      total += await this.#batches(`
        with picked as (
          select id from voicemail_messages where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update voicemail_messages m set transcription = null, phi = null, content_purged_at = $3
          from picked where m.id = picked.id`, args);
    }
    return total;
  }

  async #batches(sql: string, args: unknown[]): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.#pool.query(sql, args);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < this.#batch) return total;
    }
  }

  /** Seals call metadata and transcriptions stored in clear before the organization's HIPAA mode was on; returns how many rows. */
  async sealBackfill(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, until } of await port.backfillPending('calls')) {
      const codec = await port.codec(organizationId);
      // Calls whose metadata has no PHI key stay unsealed: the scan moves on by id past them.
      let after = '';
      total += await this.#sealBatches(async (client) => {
        const { rows } = await client.query<{ id: string; metadata: Record<string, unknown> }>(
          `select id, metadata from calls where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
              and metadata <> '{}'::jsonb and id > $4 order by id limit $3 for update`, [organizationId, until, this.#batch, after]);
        after = rows.at(-1)?.id ?? after;
        const sealed = rows.map((r) => ({ id: r.id, ...sealCallMetadata(r.id, r.metadata, codec) })).filter((r) => r.phi !== null);
        if (sealed.length > 0) {
          await client.query(
            `update calls c set metadata = s.metadata, phi = s.phi from jsonb_to_recordset($1::jsonb) as s(id text, metadata jsonb, phi text) where c.id = s.id`,
            [JSON.stringify(sealed)]);
        }
        return { picked: rows.length, changed: sealed.length };
      });
      await port.backfillDone(organizationId, 'calls', until);
    }
    for (const { organizationId, until } of await port.backfillPending('voicemail_messages')) {
      const codec = await port.codec(organizationId);
      total += await this.#sealBatches(async (client) => {
        const { rows } = await client.query<{ id: string; transcription: string }>(
          `select id, transcription from voicemail_messages where organization_id = $1 and created_at <= $2 and phi is null
              and content_purged_at is null and transcription is not null order by id limit $3 for update`, [organizationId, until, this.#batch]);
        const sealed = rows.map((r) => ({ id: r.id, phi: sealTranscription(r.id, r.transcription, codec).phi }));
        if (sealed.length > 0) {
          await client.query(
            `update voicemail_messages m set transcription = null, phi = s.phi from jsonb_to_recordset($1::jsonb) as s(id text, phi text) where m.id = s.id`,
            [JSON.stringify(sealed)]);
        }
        return { picked: rows.length, changed: sealed.length };
      });
      await port.backfillDone(organizationId, 'voicemail_messages', until);
    }
    return total;
  }

  async #sealBatches(batch: (client: PoolClient) => Promise<{ picked: number; changed: number }>): Promise<number> {
    let total = 0;
    for (;;) {
      const client = await this.#pool.connect();
      let r: { picked: number; changed: number };
      try {
        await client.query('begin');
        r = await batch(client);
        await client.query('commit');
      } catch (e) {
        await client.query('rollback').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
      total += r.changed;
      if (r.picked < this.#batch) return total;
    }
  }
}
