/**
 * CSV imports of contacts on a job: validated and counted up front, then upserted in batches that
 * each commit their progress (a job that runs again resumes after the last committed batch).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { parseInput } from '../../platform/operations.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { ConsentService } from './consent.ts';
import { Contact, ContactImport, type ImportRejection } from './contacts.entities.ts';
import { emitContactEvent } from './contacts.events.ts';
import { createContactInput, type CreateContactInput } from './contacts.schemas.ts';
import { mergeMetadata, touchContact, uniqueTags } from './contacts.shared.ts';
import { parseCsv } from './csv.ts';
import type { ContactListsService } from './lists.service.ts';
import { storedMetadata, type ContactPhi } from './contacts.phi.ts';
import type { PhiCodec } from '../../platform/phi.ts';

export const IMPORT_JOB = 'contacts.import';
const IMPORT_BATCH = 100;
export const MAX_IMPORT_ROWS = 50_000;

export class ContactImportsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #consent: ConsentService;
  readonly #lists: ContactListsService;
  readonly #phi: ContactPhi;

  constructor(deps: { orm: MikroORM; clock: Clock; jobs: Pick<Jobs, 'enqueue'>; consent: ConsentService; lists: ContactListsService; phi: ContactPhi }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#consent = deps.consent;
    this.#lists = deps.lists;
    this.#phi = deps.phi;
  }

  async startImport(scope: Scope, input: { csv: string; list_id?: string | null }): Promise<ContactImport> {
    const rows = parseCsv(input.csv);
    const header = rows[0]?.map((h) => h.trim().toLowerCase()) ?? [];
    if (!header.includes('phone') && !header.includes('email')) {
      throw new ServiceError('VALIDATION_ERROR', 'The first CSV line must be a header naming a phone or an email column', { field: 'csv', expected: ['phone', 'email', 'first_name', 'last_name', 'country', 'lifecycle_stage', 'tags', 'metadata.<key>', 'consent.<channel>'] });
    }
    const total = rows.length - 1;
    if (total < 1 || total > MAX_IMPORT_ROWS) throw new ServiceError('VALIDATION_ERROR', `A CSV import has 1 to ${MAX_IMPORT_ROWS} rows after the header`, { field: 'csv' });
    if (input.list_id) await this.#lists.getList(scope, input.list_id);
    const now = this.#clock.now();
    const id = newId('imp', now.getTime());
    // HIPAA mode: the CSV waits for its job sealed (its metadata columns are PHI).
    const csv = await this.#phi.storeCsv(scope.organizationId, id, input.csv);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const imp = tx.create(ContactImport, {
        id, organizationId: scope.organizationId, mode: scope.mode, status: 'queued', csv, listId: input.list_id ?? null,
        totalRows: total, processedRows: 0, createdCount: 0, updatedCount: 0, rejectedCount: 0, rejections: [], error: null, createdAt: now, updatedAt: now, completedAt: null,
      });
      await tx.flush();
      await this.#jobs.enqueue(IMPORT_JOB, { importId: imp.id }, { scope, em: tx });
      return imp;
    });
  }

  async getImport(scope: Scope, id: string): Promise<ContactImport> {
    const imp = await tenantEm(this.#orm, scope).findOne(ContactImport, { id });
    if (!imp) throw notFound('Contact import', id);
    return imp;
  }

  /**
   * The import job: upserts rows in batches of IMPORT_BATCH, each batch one transaction that also
   * advances the progress counters, so a job that runs again resumes after the last committed batch.
   */
  async runImport(tenant: TenantRef, importId: string): Promise<void> {
    const first = await tenantEm(this.#orm, tenant).findOne(ContactImport, { id: importId }, { populate: ['csv'] });
    if (!first || first.status === 'completed' || first.status === 'failed') return;
    const rows = parseCsv(await this.#phi.openCsv(tenant.organizationId, importId, first.csv));
    const header = rows[0]!.map((h) => h.trim().toLowerCase());
    for (;;) {
      const writer = await this.#phi.writer(tenant.organizationId);
      const done = await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const imp = await tx.findOne(ContactImport, { id: importId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!imp || imp.status === 'completed' || imp.status === 'failed') return true;
        const now = this.#clock.now();
        imp.status = 'processing';
        const start = imp.processedRows;
        const end = Math.min(imp.totalRows, start + IMPORT_BATCH);
        const rejections: ImportRejection[] = [];
        for (let i = start; i < end; i++) {
          const rowNumber = i + 2; // 1-based, after the header line
          const outcome = await this.#importRow(tx, tenant, header, rows[i + 1]!, { importId, row: rowNumber, listId: imp.listId ?? null, writer }, now);
          if (outcome === 'created') imp.createdCount++;
          else if (outcome === 'updated') imp.updatedCount++;
          else rejections.push(outcome);
        }
        imp.rejectedCount += rejections.length;
        imp.rejections = [...imp.rejections, ...rejections].slice(0, 1000);
        imp.processedRows = end;
        imp.updatedAt = now;
        if (end >= imp.totalRows) {
          imp.status = 'completed';
          imp.completedAt = now;
          imp.csv = '';
          return true;
        }
        return false;
      });
      if (done) return;
    }
  }

  /** One CSV row: validated like a created contact, upserted by phone, else email; `consent.<channel>` columns go through the consent service (source `import`). */
  async #importRow(tx: EntityManager, tenant: TenantRef, header: string[], cells: string[], at: { importId: string; row: number; listId: string | null; writer: PhiCodec | null }, now: Date): Promise<'created' | 'updated' | ImportRejection> {
    const { row, listId } = at;
    const raw: Record<string, unknown> = {};
    const metadata: Record<string, unknown> = {};
    const consent: Record<string, string> = {};
    header.forEach((h, i) => {
      const v = (cells[i] ?? '').trim();
      if (v === '') return;
      if (h.startsWith('metadata.') && h.length > 9) metadata[h.slice(9)] = v;
      else if (h.startsWith('consent.') && h.length > 8) consent[h.slice(8)] = v.toLowerCase();
      else if (h === 'tags') raw.tags = v.split(/[;|]/).map((t) => t.trim()).filter(Boolean);
      else if (['phone', 'email', 'first_name', 'last_name', 'country', 'lifecycle_stage'].includes(h)) raw[h] = v;
    });
    if (Object.keys(metadata).length) raw.metadata = metadata;
    if (Object.keys(consent).length) raw.consent = consent;
    let input: CreateContactInput;
    try {
      input = parseInput(createContactInput, raw);
    } catch (e) {
      if (e instanceof ServiceError) return { row, code: e.code, field: e.details.field as string | undefined, message: e.message };
      throw e;
    }
    if (!input.phone && !input.email) return { row, code: 'MISSING_REQUIRED_FIELD', field: 'phone', message: 'A row needs a phone or an email' };
    const byPhone = input.phone ? await tx.findOne(Contact, { phone: input.phone }) : null;
    const byEmail = input.email ? await tx.findOne(Contact, { email: input.email }) : null;
    if (byPhone && byEmail && byPhone.id !== byEmail.id) {
      return { row, code: 'ALREADY_EXISTS', field: 'email', message: `The phone and the email belong to two different contacts (${byPhone.id}, ${byEmail.id})` };
    }
    let c = byPhone ?? byEmail;
    let outcome: 'created' | 'updated';
    if (c) {
      if (input.phone) c.phone = input.phone;
      if (input.email) c.email = input.email;
      if (input.first_name) c.firstName = input.first_name;
      if (input.last_name) c.lastName = input.last_name;
      if (input.country) c.country = input.country;
      if (input.lifecycle_stage) c.lifecycleStage = input.lifecycle_stage;
      if (input.tags) c.tags = uniqueTags(c.tags, input.tags);
      if (input.metadata) await this.#phi.store(tenant, c, mergeMetadata(await this.#phi.whole(tenant.organizationId, c), input.metadata), at.writer);
      touchContact(tx, c, now, 'contact.updated');
      outcome = 'updated';
    } else {
      const id = newId('con', now.getTime());
      const stored = storedMetadata(id, input.metadata ?? {}, at.writer);
      c = tx.create(Contact, {
        id, organizationId: tenant.organizationId, mode: tenant.mode, phone: input.phone ?? null, email: input.email ?? null,
        firstName: input.first_name ?? null, lastName: input.last_name ?? null, country: input.country ?? null, lifecycleStage: input.lifecycle_stage ?? null,
        tags: uniqueTags([], input.tags ?? []), metadata: stored.metadata, phi: stored.phi, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
      });
      emitContactEvent(tx, c, 'contact.created', now);
      outcome = 'created';
    }
    this.#consent.apply(tx, c, input.consent ?? {}, 'import', now, { details: { import_id: at.importId, row } });
    // Flushed per row: the next row's lookups must see this one (two rows with one phone upsert one contact).
    await tx.flush();
    if (listId) {
      await tx.getConnection().execute(
        'insert into contact_list_members (list_id, contact_id, organization_id, mode, added_at) values (?, ?, ?, ?, ?) on conflict do nothing',
        [listId, c.id, tenant.organizationId, tenant.mode, now], 'run', tx.getTransactionContext(),
      );
    }
    return outcome;
  }
}
