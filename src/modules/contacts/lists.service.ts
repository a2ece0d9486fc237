/** Contact lists and their memberships (a contact may be in many lists; deleting a list keeps its contacts). */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { Contact, ContactList, ContactListMember } from './contacts.entities.ts';
import { selectContacts } from './contacts.shared.ts';
import type { ContactPhi } from './contacts.phi.ts';

export class ContactListsService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #phi: ContactPhi;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; phi: ContactPhi }) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#phi = deps.phi;
  }

  async createList(scope: Scope, input: { name: string; description?: string | null }): Promise<ContactList> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(ContactList, {
      id: newId('lst', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, description: input.description ?? null, createdAt: now, updatedAt: now,
    }));
  }

  async listLists(scope: Scope, input: { cursor?: string | null; limit?: number | null }): Promise<Page<ContactList>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), ContactList, scope, { list: 'contact_lists' }, input);
  }

  async getList(scope: Scope, id: string): Promise<ContactList> {
    const l = await tenantEm(this.#orm, scope).findOne(ContactList, { id });
    if (!l) throw notFound('Contact list', id);
    return l;
  }

  async updateList(scope: Scope, id: string, patch: { name?: string; description?: string | null }): Promise<ContactList> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const l = await tx.findOne(ContactList, { id });
      if (!l) throw notFound('Contact list', id);
      if (patch.name !== undefined) l.name = patch.name;
      if (patch.description !== undefined) l.description = patch.description;
      l.updatedAt = now;
      return l;
    });
  }

  /** The list and its memberships go; the contacts stay. */
  async deleteList(scope: Scope, id: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      if (!(await tx.findOne(ContactList, { id }))) throw notFound('Contact list', id);
      await tx.nativeDelete(ContactListMember, { listId: id });
      await tx.nativeDelete(ContactList, { id });
    });
  }

  async listMembers(scope: Scope, input: { id: string; cursor?: string | null; limit?: number | null }): Promise<Page<Contact>> {
    await this.getList(scope, input.id);
    const page = await this.#cursors.list(scope, { list: 'contact_list_members', filters: { list: input.id } }, input,
      (keyset) => selectContacts(this.#pool, scope, [], [], keyset, { join: 'join contact_list_members m on m.contact_id = c.id and m.list_id = ?', joinParams: [input.id] }));
    return { ...page, items: await this.#phi.reveal(scope, page.items, 'contacts.listMembers') };
  }

  /** Adds contacts (already members are skipped); an id that is not a contact of this account is a VALIDATION_ERROR and adds nothing. */
  async addMembers(scope: Scope, id: string, contactIds: string[]): Promise<{ list: ContactList; added: number }> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const list = await tx.findOne(ContactList, { id });
      if (!list) throw notFound('Contact list', id);
      const ids = [...new Set(contactIds)];
      const found = new Set((await tx.find(Contact, { id: { $in: ids } }, { fields: ['id'] })).map((c) => c.id));
      const missing = ids.findIndex((x) => !found.has(x));
      if (missing >= 0) throw new ServiceError('VALIDATION_ERROR', `${ids[missing]} is not a contact of this account`, { field: `contact_ids.${contactIds.indexOf(ids[missing]!)}`, value: ids[missing] });
      const existing = new Set((await tx.find(ContactListMember, { listId: id, contactId: { $in: ids } })).map((m) => m.contactId));
      const fresh = ids.filter((x) => !existing.has(x));
      for (const contactId of fresh) tx.create(ContactListMember, { listId: id, contactId, organizationId: scope.organizationId, mode: scope.mode, addedAt: now });
      list.updatedAt = now;
      return { list, added: fresh.length };
    });
  }

  /** Removing a contact that is not a member changes nothing (idempotent, like removing a tag). */
  async removeMember(scope: Scope, id: string, contactId: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      if (!(await tx.findOne(ContactList, { id }))) throw notFound('Contact list', id);
      await tx.nativeDelete(ContactListMember, { listId: id, contactId });
    });
  }
}
