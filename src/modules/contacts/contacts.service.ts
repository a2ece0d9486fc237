/**
 * Contacts context: contacts (unique phone and email per organization and mode), tags, per-channel
 * consent (changed and checked only through ConsentService, consent.ts, which also keeps the
 * consent history), inbound SMS keywords (STOP/START/HELP), ranked search (search.ts) and the
 * activity timeline (the event backbone, see activity.ts). Lists (lists.service.ts), segments
 * (segments.service.ts) and CSV imports (imports.service.ts) are services of their own, built
 * together by `createContactsServices`. Writes go through the ORM under the tenant filter;
 * searches, member pages and the timeline are single parameterized SQL queries on the pg pool that
 * name the tenant explicitly.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, badRequest, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type ListKey, type Page, type PageRequest } from '../../platform/pagination.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { MessageRecord as Message, MessageSenderPort } from '../messaging/messaging.ports.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { activityPage, latestActivity, type ActivityEntry } from './activity.ts';
import { ConsentService, originOf } from './consent.ts';
import { ConsentCheck } from './consent.check.ts';
import {
  CONSENT_CHANNELS, ConsentChange, Contact, ContactList, ContactListMember,
  type ConsentChannel, type ConsentSource, type ConsentStatus,
} from './contacts.entities.ts';
import { emitContactEvent } from './contacts.events.ts';
import type { CreateContactInput, ListContactsInput, ListOptOutsInput, UpdateContactInput } from './contacts.schemas.ts';
import { COLUMNS, mergeMetadata, numbered, rowToContact, selectContacts, touchContact, uniqueTags } from './contacts.shared.ts';
import { ContactImportsService } from './imports.service.ts';
import { ContactListsService } from './lists.service.ts';
import { decodeRankKey, encodeRankKey, rankedSearchSql, searchTerms } from './search.ts';
import { SegmentsService } from './segments.service.ts';
import { ContactPhi, storedMetadata } from './contacts.phi.ts';
import type { PhiPort } from '../../platform/phi.ts';

/** Inbound SMS keywords: only a message that is exactly one of these (trimmed, any case) counts. */
export const STOP_KEYWORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT']);
export const START_KEYWORDS = new Set(['START', 'UNSTOP']);
export const HELP_KEYWORDS = new Set(['HELP']);
export const STOP_REPLY = 'You have been unsubscribed and will receive no further messages. Reply START to resubscribe.';
export const START_REPLY = 'You have been resubscribed. Reply STOP to unsubscribe, HELP for help.';
export const HELP_REPLY = 'Reply STOP to unsubscribe, START to resubscribe. Msg & data rates may apply.';

export type ContactsDeps = {
  orm: MikroORM;
  pool: Pool;
  clock: Clock;
  cursors: CursorCodec;
  jobs: Pick<Jobs, 'enqueue'>;
  messaging: MessageSenderPort;
  /** The batched opt-out lookup behind ConsentService.assertCanContact (one per app, shared). */
  consentCheck?: ConsentCheck;
  /** HIPAA mode (optional port `phi`): PHI metadata keys sealed, opened or redacted on reads. */
  phi?: () => PhiPort | undefined;
};

/** The module's services (its operations run on them), built together below. */
export type ContactsServices = { contacts: ContactsService; contactLists: ContactListsService; contactSegments: SegmentsService; contactImports: ContactImportsService };

/** The module's services: one consent service shared by contacts and imports. */
export function createContactsServices(deps: ContactsDeps): ContactsServices {
  const consent = new ConsentService({ orm: deps.orm, cursors: deps.cursors, check: deps.consentCheck ?? new ConsentCheck(deps.pool) });
  const phi = new ContactPhi(deps.phi ?? (() => undefined));
  const contactLists = new ContactListsService({ ...deps, phi });
  const contactImports = new ContactImportsService({ orm: deps.orm, clock: deps.clock, jobs: deps.jobs, consent, lists: contactLists, phi });
  const contacts = new ContactsService({ orm: deps.orm, pool: deps.pool, clock: deps.clock, cursors: deps.cursors, messaging: deps.messaging, consent, imports: contactImports, phi });
  return { contacts, contactLists, contactSegments: new SegmentsService({ ...deps, phi }), contactImports };
}

export class ContactsService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #messaging: MessageSenderPort;
  readonly #imports: ContactImportsService;
  readonly #phi: ContactPhi;
  /** The one consent service: every consent change and every consent check goes through it. */
  readonly consent: ConsentService;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; messaging: MessageSenderPort; consent: ConsentService; imports: ContactImportsService; phi: ContactPhi }) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#messaging = deps.messaging;
    this.#imports = deps.imports;
    this.#phi = deps.phi;
    this.consent = deps.consent;
  }

  // ---- contacts ----

  /** The new contact as its creator sent it (its own metadata, not a disclosure: not redacted, not logged). */
  async create(scope: Scope, input: CreateContactInput): Promise<Contact> {
    if (!input.phone && !input.email) throw new ServiceError('MISSING_REQUIRED_FIELD', 'A contact needs a phone or an email', { field: 'phone' });
    const now = this.#clock.now();
    const id = newId('con', now.getTime());
    // HIPAA mode: the PHI metadata keys are stored sealed (contacts.phi.ts).
    const stored = storedMetadata(id, input.metadata ?? {}, await this.#phi.writer(scope.organizationId));
    const created = await this.#unique(input, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = tx.create(Contact, {
        id, organizationId: scope.organizationId, mode: scope.mode, phone: input.phone ?? null, email: input.email ?? null,
        firstName: input.first_name ?? null, lastName: input.last_name ?? null, country: input.country ?? null, lifecycleStage: input.lifecycle_stage ?? null,
        tags: uniqueTags([], input.tags ?? []), metadata: stored.metadata, phi: stored.phi, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
      });
      await tx.flush();
      emitContactEvent(tx, c, 'contact.created', now);
      // Initial consent is a change like any other: history rows and opted_in / opted_out events.
      this.consent.apply(tx, c, input.consent ?? {}, 'api', now, originOf(scope));
      return c;
    }));
    return { ...created, metadata: input.metadata ?? {}, phi: null };
  }

  /** ALREADY_EXISTS 409 for a phone or email another contact of the organization and mode has. */
  async #unique<T>(input: { phone?: string | null; email?: string | null }, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      const err = e as { code?: string; constraint?: string; message?: string };
      if (err.code === '23505' || /unique|duplicate key/i.test(String(err.message))) {
        const field = /contacts_email_idx/.test(String(err.message ?? '') + (err.constraint ?? '')) ? 'email' : 'phone';
        throw new ServiceError('ALREADY_EXISTS', `A contact with this ${field} already exists`, { field, value: field === 'email' ? input.email : input.phone });
      }
      throw e;
    }
  }

  async get(scope: Scope, id: string): Promise<Contact> {
    const c = await tenantEm(this.#orm, scope).findOne(Contact, { id });
    if (!c) throw notFound('Contact', id);
    return this.#phi.revealOne(scope, c, 'contacts.get');
  }

  /** Several contacts by id in one query (GraphQL loaders); missing ids are left out. PHI as `reveal` shows it. */
  async byIds(scope: Scope, ids: readonly string[]): Promise<Contact[]> {
    if (!ids.length) return [];
    return this.#phi.reveal(scope, await tenantEm(this.#orm, scope).find(Contact, { id: { $in: [...ids] } }), 'contacts.byIds');
  }

  async list(scope: Scope, input: ListContactsInput): Promise<Page<Contact>> {
    const filters = { search: input.search ?? null, lifecycle_stage: input.lifecycle_stage ?? null, country: input.country ?? null, tag: input.tag ?? null };
    const where: string[] = [];
    const params: unknown[] = [];
    if (filters.lifecycle_stage) { where.push('c.lifecycle_stage = ?'); params.push(filters.lifecycle_stage); }
    if (filters.country) { where.push('c.country = ?'); params.push(filters.country); }
    if (filters.tag) { where.push('c.tags @> ?::jsonb'); params.push(JSON.stringify([filters.tag])); }
    return this.#revealPage(scope, await this.#page(scope, { list: 'contacts', filters }, where, params, input, filters.search), 'contacts.list');
  }

  async #revealPage(scope: Scope, page: Page<Contact>, operation: string): Promise<Page<Contact>> {
    return { ...page, items: await this.#phi.reveal(scope, page.items, operation) };
  }

  /**
   * A page of contacts matching `where` (predicates over `contacts c` with `?` placeholders):
   * newest first on an id keyset, or, with a search term, best match first on a (score, id) keyset.
   */
  async #page(scope: Scope, key: ListKey, where: string[], params: unknown[], page: PageRequest, search: string | null): Promise<Page<Contact>> {
    if (!search) return this.#cursors.list(scope, key, page, (keyset) => selectContacts(this.#pool, scope, where, params, keyset));
    // Ranked: the cursor carries a (score, id) key instead of an id, and pages go forward only.
    if (page.backward || page.before) throw badRequest('A search ranks contacts best match first and pages forward only: use first/after (cursor)', { field: 'before' });
    const limit = validateLimit(page.limit);
    const after = page.cursor ? this.#cursors.decode(scope, key, page.cursor) : undefined;
    const afterKey = after === undefined ? undefined : decodeRankKey(after);
    if (after !== undefined && !afterKey) throw new ServiceError('INVALID_CURSOR', 'Cursor is invalid: malformed', { field: 'cursor' });
    const { sql, params: all } = rankedSearchSql(searchTerms(search), { tenant: scope, columns: COLUMNS, where, params }, afterKey, limit + 1);
    const rows = (await this.#pool.query(numbered(sql), all)).rows;
    const scores = new Map<string, number>(rows.map((r) => [String(r.id), Number(r.score)]));
    const items = rows.slice(0, limit).map(rowToContact);
    const hasMore = rows.length > limit;
    const cursorFor = (id: string) => this.#cursors.encode(scope, key, encodeRankKey({ score: scores.get(id) ?? 0, id }));
    return { items, hasMore, hasPrevious: after !== undefined, nextCursor: hasMore ? cursorFor(items[items.length - 1]!.id) : null, cursorFor };
  }

  async update(scope: Scope, id: string, patch: UpdateContactInput): Promise<Contact> {
    const now = this.#clock.now();
    const updated = await this.#unique(patch, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      if (patch.phone !== undefined) c.phone = patch.phone;
      if (patch.email !== undefined) c.email = patch.email;
      if (!c.phone && !c.email) throw new ServiceError('VALIDATION_ERROR', 'A contact keeps a phone or an email; both cannot be removed', { field: patch.phone === null ? 'phone' : 'email' });
      if (patch.first_name !== undefined) c.firstName = patch.first_name;
      if (patch.last_name !== undefined) c.lastName = patch.last_name;
      if (patch.country !== undefined) c.country = patch.country;
      if (patch.lifecycle_stage !== undefined) c.lifecycleStage = patch.lifecycle_stage;
      if (patch.tags !== undefined) c.tags = uniqueTags([], patch.tags ?? []);
      if (patch.metadata !== undefined) {
        // Merged with the whole stored metadata (sealed keys opened), then stored again: sealed in HIPAA mode.
        const merged = patch.metadata === null ? {} : mergeMetadata(await this.#phi.whole(scope.organizationId, c), patch.metadata);
        await this.#phi.store(scope, c, merged);
      }
      touchContact(tx, c, now, 'contact.updated', scope.chainDepth);
      await tx.flush();
      return c;
    }));
    return this.#phi.revealOne(scope, updated, 'contacts.update');
  }

  /**
   * Permanent: the contact, its list memberships and its consent history (also cascades). Messages
   * and events stay (the organization's message records and event log); the timeline built from them
   * is reachable only through a contact.
   */
  async remove(scope: Scope, id: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id });
      if (!c) throw notFound('Contact', id);
      await tx.nativeDelete(ContactListMember, { contactId: id });
      await tx.nativeDelete(ConsentChange, { contactId: id });
      await tx.nativeDelete(Contact, { id });
      emitEvent(tx, scope, { type: 'contact.deleted', resourceType: 'contact', resourceId: id, sequence: c.sequence + 1, data: { id, contact_id: id } }, now);
    });
  }

  async addTags(scope: Scope, id: string, tags: string[]): Promise<Contact> {
    return this.#mutate(scope, id, (c) => { c.tags = uniqueTags(c.tags, tags); });
  }

  /** Removing a tag the contact does not have changes nothing (and is not an error). */
  async removeTag(scope: Scope, id: string, tag: string): Promise<Contact> {
    return this.#mutate(scope, id, (c) => { c.tags = c.tags.filter((t) => t !== tag.trim()); });
  }

  async setPreferences(scope: Scope, id: string, preferences: Partial<Record<ConsentChannel, ConsentStatus>>, source: ConsentSource = 'api'): Promise<Contact> {
    const now = this.#clock.now();
    const c = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      this.consent.apply(tx, c, preferences, source, now, originOf(scope));
      return c;
    });
    return this.#phi.revealOne(scope, c, 'contacts.setPreferences');
  }

  async #mutate(scope: Scope, id: string, change: (c: Contact) => void): Promise<Contact> {
    const now = this.#clock.now();
    const c = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      change(c);
      touchContact(tx, c, now, 'contact.updated', scope.chainDepth);
      return c;
    });
    return this.#phi.revealOne(scope, c, 'contacts.update');
  }

  async listOptOuts(scope: Scope, input: ListOptOutsInput): Promise<Page<Contact>> {
    const filters = { channel: input.channel ?? null, search: input.search ?? null };
    const params: unknown[] = [];
    const channels = filters.channel ? [filters.channel] : CONSENT_CHANNELS;
    const where = [`(${channels.map((ch) => { params.push(JSON.stringify({ [ch]: { status: 'opted_out' } })); return 'c.consent @> ?::jsonb'; }).join(' or ')})`];
    return this.#revealPage(scope, await this.#page(scope, { list: 'contact_optouts', filters }, where, params, input, filters.search), 'contacts.listOptOuts');
  }

  /** The timeline: events with the contact's phone or email as counterpart, newest first (see activity.ts). */
  async activity(scope: Scope, id: string, page: PageRequest): Promise<Page<ActivityEntry>> {
    const c = await tenantEm(this.#orm, scope).findOne(Contact, { id }, { fields: ['id', 'phone', 'email'] });
    if (!c) throw notFound('Contact', id);
    const addresses = [c.phone, c.email].filter((a): a is string => !!a);
    return this.#cursors.list(scope, { list: 'contact_activity', filters: { contact: id } }, page, (keyset) => activityPage(this.#pool, scope, addresses, keyset));
  }

  /**
   * Messaging's inbound hook, inside the transaction that stores the inbound message: an SMS that is
   * exactly a keyword opts the sender out (STOP…) or back in (START, UNSTOP), creating the contact
   * when absent (source `keyword`), and answers once per change; HELP always gets the help text.
   * The answer bypasses the opt-out check (it is the last message allowed). A reply that cannot be
   * sent (no provider) does not undo the opt-out.
   */
  async handleInbound(tx: EntityManager, tenant: TenantRef, message: Message): Promise<void> {
    if (message.channel !== 'sms' || message.direction !== 'inbound') return;
    const keyword = (message.body ?? '').trim().toUpperCase();
    const kind = STOP_KEYWORDS.has(keyword) ? 'stop' : START_KEYWORDS.has(keyword) ? 'start' : HELP_KEYWORDS.has(keyword) ? 'help' : undefined;
    if (!kind) return;
    const phone = normalizePhone(message.from);
    if (!phone) return;
    let reply: string | undefined = HELP_REPLY;
    if (kind !== 'help') {
      const now = this.#clock.now();
      let c = await tx.findOne(Contact, { phone }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) {
        c = tx.create(Contact, {
          id: newId('con', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, phone, email: null, firstName: null, lastName: null,
          country: null, lifecycleStage: null, tags: [], metadata: {}, phi: null, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
        });
        emitContactEvent(tx, c, 'contact.created', now);
      }
      const changed = this.consent.apply(tx, c, { sms: kind === 'stop' ? 'opted_out' : 'opted_in' }, 'keyword', now, { details: { keyword, message_id: message.id } });
      await tx.flush();
      reply = changed.length ? (kind === 'stop' ? STOP_REPLY : START_REPLY) : undefined;
    }
    if (!reply) return;
    const scope = systemScope(tenant.organizationId, tenant.mode, 'starter', `req_keyword_${message.id}`);
    try {
      await this.#messaging.sendSms(scope, { to: phone, body: reply, from: message.to }, { within: tx, bypassConsent: true });
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
    }
  }

  /**
   * Lists of each of these contacts (GraphQL `Contact.lists`, batched by a request-scoped loader):
   * one query over memberships joined to their lists, newest list first. Every id gets an entry.
   */
  async listsOf(tenant: TenantRef, contactIds: readonly string[]): Promise<Map<string, ContactList[]>> {
    const out = new Map<string, ContactList[]>(contactIds.map((id) => [id, []]));
    if (!contactIds.length) return out;
    const res = await this.#pool.query(
      `select m.contact_id, l.id, l.organization_id, l.mode, l.name, l.description, l.created_at, l.updated_at
         from contact_list_members m
         join contact_lists l on l.id = m.list_id and l.organization_id = $1 and l.mode = $2
        where m.organization_id = $1 and m.mode = $2 and m.contact_id = any($3::text[])
        order by l.id desc`,
      [tenant.organizationId, tenant.mode, [...new Set(contactIds)]],
    );
    for (const r of res.rows) {
      out.get(r.contact_id)?.push({
        id: r.id, organizationId: r.organization_id, mode: r.mode, name: r.name, description: r.description,
        createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at),
      } as ContactList);
    }
    return out;
  }

  /**
   * The newest timeline entry of each contact (GraphQL `Contact.lastActivity`, batched by a
   * request-scoped loader): one query over the events (see activity.ts). Contacts without any are absent.
   */
  async lastActivityOf(tenant: TenantRef, contacts: readonly Pick<Contact, 'id' | 'phone' | 'email'>[]): Promise<Map<string, ActivityEntry>> {
    const addresses = new Map(contacts.map((c) => [c.id, [c.phone, c.email].filter((a): a is string => !!a)]));
    return latestActivity(this.#pool, tenant, addresses);
  }

  /** The import job's step, also reachable here (`services.contacts.runImport`); see imports.service.ts. */
  runImport(tenant: TenantRef, importId: string): Promise<void> {
    return this.#imports.runImport(tenant, importId);
  }
}
