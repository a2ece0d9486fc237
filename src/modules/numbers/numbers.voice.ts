/** The `voiceNumbers` port: the organization's active numbers that carry voice (voice calls and conferences use them as caller id). */
import type { MikroORM } from '@mikro-orm/postgresql';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { VoiceNumbersPort } from '../voice/voice.ports.ts';
import { PhoneNumber } from './numbers.entities.ts';

export function voiceNumbersPort(orm: MikroORM): VoiceNumbersPort {
  return {
    async voiceNumbers(tenant) {
      const rows = await tenantEm(orm, tenant).find(PhoneNumber, { status: 'active', capabilities: { $contains: ['voice'] } }, { fields: ['number'], orderBy: { id: 'asc' } });
      return rows.map((r) => r.number);
    },
  };
}
