/** The `flowContacts` port (declared by flows): contact changes made by flow nodes, through the contacts use cases. */
import { systemScope } from '../../platform/auth/scope.ts';
import { ServiceError, isServiceError } from '../../platform/errors.ts';
import type { FlowContactsPort } from '../flows/flows.ports.ts';
import type { ContactsServices } from './contacts.service.ts';
import { updateContactInput } from './contacts.schemas.ts';

export function flowContactsPort({ contacts, contactLists }: ContactsServices): FlowContactsPort {
  return {
    async updateContact(scope, contactId, fields) {
      const parsed = updateContactInput.safeParse(fields);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ServiceError('VALIDATION_ERROR', issue.message, { field: issue.path.join('.') });
      }
      await contacts.update(scope, contactId, parsed.data);
    },
    async addTags(scope, contactId, tags) {
      await contacts.addTags(scope, contactId, tags);
    },
    async addToList(scope, listId, contactId) {
      await contactLists.addMembers(scope, listId, [contactId]);
    },
    async listExists(tenant, listId) {
      try {
        await contactLists.getList(systemScope(tenant.organizationId, tenant.mode, 'starter', 'flows'), listId);
        return true;
      } catch (e) {
        if (isServiceError(e) && e.code === 'NOT_FOUND') return false;
        throw e;
      }
    },
  };
}
