/** The `agentNumbers` port (declared by agents): the number a deployed agent answers on, and its binding. */
import type { MikroORM } from '@mikro-orm/postgresql';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { AgentNumbersPort } from '../agents/agents.ports.ts';
import { PhoneNumber } from './numbers.entities.ts';

export function agentNumbers(orm: MikroORM): AgentNumbersPort {
  return {
    async findNumber(tenant, query) {
      const where = query.numberId ? { id: query.numberId } : query.phoneNumber ? { number: query.phoneNumber } : {};
      const n = await tenantEm(orm, tenant).findOne(PhoneNumber, { ...where, status: 'active' }, { orderBy: { id: 'asc' } });
      return n ? { id: n.id, number: n.number } : undefined;
    },
    async bindAgent(tenant, numberId, agentId) {
      await tenantEm(orm, tenant).nativeUpdate(PhoneNumber, { id: numberId }, { agentId });
    },
  };
}
