/**
 * HIPAA housekeeping of voice (batched, idempotent, safe with several instances: see
 * platform/phiHousekeeping.ts):
 * - retention: calls and voicemail messages older than the organization's retention period lose
 *   their recording (a call's recorded seconds; a voicemail message's audio, served no more) and
 *   their PHI (sealed metadata keys, transcriptions); the rows, addresses, statuses, durations and
 *   timestamps stay (`content_purged_at` set). The sandbox gateway keeps no media; a gateway that
 *   stores recordings deletes them through this job too.
 * - backfill: call metadata and transcriptions stored in clear before the mode was on are sealed.
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import { sealCallMetadata, sealTranscription } from './voice.phi.ts';

export class VoiceRetention extends ContextHousekeeping {
  /** Purges recordings, PHI metadata and transcriptions past their organization's retention period; returns how many rows. */
  purgeExpired(): Promise<number> {
    // Unsealed metadata (stored before the mode, not yet backfilled) may hold PHI: it goes too.
    return this.housekeeping.purge([`
        with picked as (
          select id from calls where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update calls c set recording_seconds = null, phi = null, content_purged_at = $3,
               metadata = case when c.phi is null then '{}'::jsonb else c.metadata end
          from picked where c.id = picked.id`, `
        with picked as (
          select id from voicemail_messages where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update voicemail_messages m set transcription = null, phi = null, content_purged_at = $3
          from picked where m.id = picked.id`]);
  }

  /** Seals call metadata and transcriptions stored in clear before the organization's HIPAA mode was on; returns how many rows. */
  async sealBackfill(): Promise<number> {
    // Calls whose metadata has no PHI key stay unsealed: the scan moves on by id past them (per organization).
    let scan = { organizationId: '', after: '' };
    const calls = await this.housekeeping.backfill('calls', async (client, { organizationId, until, limit, codec }) => {
      if (scan.organizationId !== organizationId) scan = { organizationId, after: '' };
      const { rows } = await client.query<{ id: string; metadata: Record<string, unknown> }>(
        `select id, metadata from calls where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
            and metadata <> '{}'::jsonb and id > $4 order by id limit $3 for update`, [organizationId, until, limit, scan.after]);
      scan.after = rows.at(-1)?.id ?? scan.after;
      const sealed = rows.map((r) => ({ id: r.id, ...sealCallMetadata(r.id, r.metadata, codec) })).filter((r) => r.phi !== null);
      if (sealed.length > 0) {
        await client.query(
          `update calls c set metadata = s.metadata, phi = s.phi from jsonb_to_recordset($1::jsonb) as s(id text, metadata jsonb, phi text) where c.id = s.id`,
          [JSON.stringify(sealed)]);
      }
      return { picked: rows.length, changed: sealed.length };
    });
    const voicemail = await this.housekeeping.backfill('voicemail_messages', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; transcription: string }>(
        `select id, transcription from voicemail_messages where organization_id = $1 and created_at <= $2 and phi is null
            and content_purged_at is null and transcription is not null order by id limit $3 for update`, [organizationId, until, limit]);
      const sealed = rows.map((r) => ({ id: r.id, phi: sealTranscription(r.id, r.transcription, codec).phi }));
      if (sealed.length > 0) {
        await client.query(
          `update voicemail_messages m set transcription = null, phi = s.phi from jsonb_to_recordset($1::jsonb) as s(id text, phi text) where m.id = s.id`,
          [JSON.stringify(sealed)]);
      }
      return { picked: rows.length, changed: sealed.length };
    });
    return calls + voicemail;
  }
}
