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
import type { Pool } from 'pg';
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

/** Seals the clear vars of recipients frozen before their organization's HIPAA mode; batched, idempotent, safe with several instances. */
export class CampaignsBackfill {
  readonly #pool: Pool;
  readonly #phi: () => PhiPort | undefined;
  readonly #batch: number;

  constructor(deps: { pool: Pool; phi: () => PhiPort | undefined; batchSize: number }) {
    this.#pool = deps.pool;
    this.#phi = deps.phi;
    this.#batch = deps.batchSize;
  }

  async sealBackfill(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, until } of await port.backfillPending('campaign_recipients')) {
      const codec = await port.codec(organizationId);
      const { rows: campaigns } = await this.#pool.query<{ id: string }>(
        'select id from campaigns where organization_id = $1 and snapshot_at is not null order by id', [organizationId]);
      for (const { id } of campaigns) {
        let after = 0;
        for (;;) {
          const n = await this.#batchOf(codec, id, after);
          total += n.sealed;
          if (n.scanned < this.#batch) break;
          after = n.last;
        }
      }
      await port.backfillDone(organizationId, 'campaign_recipients', until);
    }
    return total;
  }

  async #batchOf(codec: PhiCodec, campaignId: string, after: number): Promise<{ scanned: number; sealed: number; last: number }> {
    const client = await this.#pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{ seq: number; vars: StoredVars }>(
        `select seq, vars from campaign_recipients where campaign_id = $1 and seq > $2 order by seq limit $3 for update`, [campaignId, after, this.#batch]);
      const clear = rows.filter((r) => sealedOf(r.vars) === undefined);
      if (clear.length > 0) {
        await client.query(
          `update campaign_recipients r set vars = s.vars from jsonb_to_recordset($2::jsonb) as s(seq int, vars jsonb) where r.campaign_id = $1 and r.seq = s.seq`,
          [campaignId, JSON.stringify(clear.map((r) => ({ seq: r.seq, vars: storeVars(codec, campaignId, r.seq, r.vars as ContactFields) })))]);
      }
      await client.query('commit');
      return { scanned: rows.length, sealed: clear.length, last: rows[rows.length - 1]?.seq ?? after };
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }
}
