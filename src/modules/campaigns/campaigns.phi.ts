/**
 * HIPAA mode in campaigns. The only per-recipient PHI a campaign stores is the contact fields a
 * frozen recipient is personalized with (`campaign_recipients.vars`: names, addresses, country and
 * the contact's metadata, PHI keys opened): in HIPAA mode they are stored sealed, as
 * `{ "$phi": "phi1:…" }` bound to organization, table `campaign_recipients`, row `<campaign>:<seq>`
 * and column `vars`, and opened by the batch that sends (the platform's own read: not in the PHI
 * access log). The rendered bodies are never stored here: they go to messaging, which seals them;
 * job payloads carry ids and seq ranges only; stats and events carry counters. The campaign's own
 * definition (body template, template variables) is authored by the organization and stays clear.
 *
 * The backfill seals the vars of recipients frozen before the organization's mode was on.
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { PhiCodec, PhiPort, PhiRef } from '../../platform/phi.ts';
import type { ContactFields } from './campaigns.rules.ts';

const KEY = '$phi';
export type StoredVars = ContactFields | { [KEY]: string };

const ref = (campaignId: string, seq: number): PhiRef => ({ table: 'campaign_recipients', rowId: `${campaignId}:${seq}`, column: 'vars' });

const sealedOf = (vars: StoredVars): string | undefined => {
  const v = (vars as Record<string, unknown>)[KEY];
  return typeof v === 'string' ? v : undefined;
};

/** The vars to store: sealed with a codec (HIPAA mode), else as they are. */
export function storeVars(codec: PhiCodec | null, campaignId: string, seq: number, vars: ContactFields): StoredVars {
  return codec ? { [KEY]: codec.seal(ref(campaignId, seq), JSON.stringify(vars)) } : vars;
}

/** Rows with their vars opened (through the port when any is sealed). */
export async function openVars<R extends { seq: number; vars: StoredVars }>(port: PhiPort | undefined, tenant: TenantRef, campaignId: string, rows: readonly R[]): Promise<(Omit<R, 'vars'> & { vars: ContactFields })[]> {
  const sealed = rows.map((r) => sealedOf(r.vars)).filter((x): x is string => x !== undefined);
  if (sealed.length > 0 && !port) throw new Error('a campaign recipient holds sealed PHI but no module provides the phi port');
  const codec = sealed.length > 0 ? await port!.codec(tenant.organizationId, sealed) : undefined;
  return rows.map((r) => {
    const s = sealedOf(r.vars);
    return { ...r, vars: s && codec ? (JSON.parse(codec.open(ref(campaignId, r.seq), s)) as ContactFields) : (r.vars as ContactFields) };
  });
}

/** Seals the clear vars of recipients frozen before their organization's HIPAA mode (batched, idempotent, safe with several instances). */
export class CampaignsBackfill extends ContextHousekeeping {
  sealBackfill(): Promise<number> {
    // Recipients in (campaign, seq) order across the organization's frozen audiences; sealed ones are passed over.
    let scan = { organizationId: '', campaignId: '', seq: 0 };
    return this.housekeeping.backfill('campaign_recipients', async (client, { organizationId, limit, codec }) => {
      if (scan.organizationId !== organizationId) scan = { organizationId, campaignId: '', seq: 0 };
      const { rows } = await client.query<{ campaign_id: string; seq: number; vars: StoredVars }>(
        `select r.campaign_id, r.seq, r.vars from campaign_recipients r join campaigns c on c.id = r.campaign_id
          where c.organization_id = $1 and c.snapshot_at is not null and (r.campaign_id, r.seq) > ($2, $3)
          order by r.campaign_id, r.seq limit $4 for update of r`, [organizationId, scan.campaignId, scan.seq, limit]);
      const last = rows.at(-1);
      if (last) scan = { organizationId, campaignId: last.campaign_id, seq: last.seq };
      const clear = rows.filter((r) => sealedOf(r.vars) === undefined);
      if (clear.length > 0) {
        await client.query(
          `update campaign_recipients r set vars = s.vars from jsonb_to_recordset($1::jsonb) as s(campaign_id text, seq int, vars jsonb)
            where r.campaign_id = s.campaign_id and r.seq = s.seq`,
          [JSON.stringify(clear.map((r) => ({ campaign_id: r.campaign_id, seq: r.seq, vars: storeVars(codec, r.campaign_id, r.seq, r.vars as ContactFields) })))]);
      }
      return { picked: rows.length, changed: clear.length };
    });
  }
}
