/**
 * HIPAA backfill of contacts (batched, idempotent, safe with several instances: see
 * platform/phiHousekeeping.ts): for each organization in HIPAA mode whose contacts stored before
 * the mode was on (or by an instance that had not seen the change yet) are not sealed yet, every
 * contact's PHI metadata keys still in clear are sealed into `phi` (merged with what is sealed there
 * already; a contact stored before the mode may have been touched since, so every contact with
 * clear metadata is looked at, once), and the CSV of an import still waiting for its job is sealed.
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import { splitMetadata } from '../../platform/phi.ts';
import type { Contact } from './contacts.entities.ts';
import { ContactPhi, openContact, storedMetadata } from './contacts.phi.ts';

export class ContactsBackfill extends ContextHousekeeping {
  /** Seals clear PHI metadata (and waiting import CSVs) of organizations in HIPAA mode; returns how many rows were sealed. */
  async sealBackfill(): Promise<number> {
    // The scan moves on by id past contacts whose clear metadata holds no PHI key (per organization).
    let scan = { organizationId: '', after: '' };
    const contacts = await this.housekeeping.backfill('contacts', async (client, { organizationId, limit, codecFor }) => {
      if (scan.organizationId !== organizationId) scan = { organizationId, after: '' };
      const { rows } = await client.query<{ id: string; metadata: Record<string, unknown>; phi: string | null }>(
        `select id, metadata, phi from contacts
          where organization_id = $1 and id > $2 and metadata <> '{}'::jsonb
          order by id limit $3 for update`, [organizationId, scan.after, limit]);
      scan.after = rows.at(-1)?.id ?? scan.after;
      const codec = await codecFor(rows.map((r) => r.phi));
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
      return { picked: rows.length, changed: changed.length };
    });
    // The CSVs of imports not run yet (a finished import keeps none).
    const imports = await this.housekeeping.backfill('contact_imports', async (client, { organizationId, limit, codec }) => {
      const { rows } = await client.query<{ id: string; csv: string }>(
        `select id, csv from contact_imports where organization_id = $1 and csv <> '' and csv !~ '^phi[0-9]+:'
          order by id limit $2 for update`, [organizationId, limit]);
      let changed = 0;
      for (const r of rows) {
        const sealed = ContactPhi.sealCsv(codec, r.id, r.csv);
        if (sealed === null) continue;
        await client.query('update contact_imports set csv = $2 where id = $1', [r.id, sealed]);
        changed++;
      }
      return { picked: rows.length, changed };
    });
    return contacts + imports;
  }
}
