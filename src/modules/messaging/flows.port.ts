/** The `flowMessages` port (declared by flows): inbound message bodies and template lookups. */
import { systemScope } from '../../platform/auth/scope.ts';
import { isServiceError } from '../../platform/errors.ts';
import type { FlowMessagesPort } from '../flows/flows.ports.ts';
import type { MessagingService } from './messaging.service.ts';
import type { TemplatesService } from './templates.service.ts';

export function flowMessagesPort(messaging: MessagingService, templates: TemplatesService): FlowMessagesPort {
  const found = async <T>(read: () => Promise<T>): Promise<T | null> => {
    try {
      return await read();
    } catch (e) {
      if (isServiceError(e) && e.code === 'NOT_FOUND') return null;
      throw e;
    }
  };
  return {
    async inboundMessage(tenant, messageId) {
      const m = await found(() => messaging.inboundForFlows(tenant, messageId));
      return m && m.direction === 'inbound' ? { body: m.body, phi: m.sealed } : null;
    },
    async templateExists(tenant, templateId) {
      return (await found(() => templates.get(systemScope(tenant.organizationId, tenant.mode, 'starter', 'flows'), templateId))) !== null;
    },
  };
}
