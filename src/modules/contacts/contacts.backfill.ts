/**
 * HIPAA backfill of contacts, in batches, idempotent and safe with several instances: for each
 * organization in HIPAA mode whose contacts stored before the mode was on (or by an instance that
 * had not seen the change yet) are not sealed yet, every contact's PHI metadata keys still in clear
 * are sealed into `phi` (merged with what is sealed there already; a contact stored before the mode
 * may have been touched since, so every contact with clear metadata is looked at, once), and the
 * CSV of an import still waiting for its job is sealed. Rows are taken in id order under row
 * locks; a second run finds nothing left.
 */
import type { Pool } from 'pg';
import { splitMetadata, type PhiPort } from '../../platform/phi.ts';
import type { Contact } from './contacts.entities.ts';
import { ContactPhi, openContact, storedMetadata } from './contacts.phi.ts';

export class ContactsBackfill {
  readonly #pool: Pool;
  readonly #phi: () => PhiPort | undefined;
  readonly #batch: number;

  constructor(deps: { pool: Pool; phi: () => PhiPort | undefined; batchSize: number }) {
    this.#pool = deps.pool;
    this.#phi = deps.phi;
    this.#batch = deps.batchSize;
  }

  /** Seals clear PHI metadata of organizations in HIPAA mode; returns how many contacts (and imports) were sealed. */
  async sealBackfill(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, until } of await port.backfillPending('contacts')) {
      let after = '';
      for (;;) {
        const { scanned, sealed, last } = await this.#contactsBatch(port, organizationId, after);
        total += sealed;
        if (scanned < this.#batch) break;
        after = last;
      }
      total += await this.#imports(port, organizationId);
      await port.backfillDone(organizationId, 'contacts', until);
    }
    return total;
  }

  async #contactsBatch(port: PhiPort, organizationId: string, after: string): Promise<{ scanned: number; sealed: number; last: string }> {
    const client = await this.#pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{ id: string; metadata: Record<string, unknown>; phi: string | null }>(
        `select id, metadata, phi from contacts
          where organization_id = $1 and id > $2 and metadata <> '{}'::jsonb
          order by id limit $3 for update`, [organizationId, after, this.#batch]);
      const codec = await port.codec(organizationId, rows.map((r) => r.phi));
      const changed: { id: string; metadata: Record<string, unknown>; phi: string | null }[] = [];
      for (const r of rows) {
        if (Object.keys(splitMetadata(r.metadata, (k) => codec.isPhiKey(k)).phi).length === 0) continue;
        const whole = openContact({ ...r, organizationId } as unknown as Contact, codec).metadata;
        changed.push({ id: r.id, ...storedMetadata(r.id, whole, codec) });
      }
      if (changed.length > 0) {
        await client.query(
          `update contacts c set metadata = s.metadata, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, metadata jsonb, phi text) where c.id = s.id`,
          [JSON.stringify(changed)]);
      }
      await client.query('commit');
      return { scanned: rows.length, sealed: changed.length, last: rows[rows.length - 1]?.id ?? after };
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  /** The CSVs of imports not run yet (a finished import keeps none). */
  async #imports(port: PhiPort, organizationId: string): Promise<number> {
    const client = await this.#pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{ id: string; csv: string }>(
        `select id, csv from contact_imports where organization_id = $1 and csv <> '' and csv !~ '^phi[0-9]+:' for update`, [organizationId]);
      let n = 0;
      if (rows.length > 0) {
        const codec = await port.codec(organizationId);
        for (const r of rows) {
          const sealed = ContactPhi.sealCsv(codec, r.id, r.csv);
          if (sealed === null) continue;
          await client.query('update contact_imports set csv = $2 where id = $1', [r.id, sealed]);
          n++;
        }
      }
      await client.query('commit');
      return n;
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }
}
