/** The `voiceRouteTargets` port (declared in voice.ports.ts, used by numbers): whether a number's voice_route target exists. */
import type { MikroORM } from '@mikro-orm/postgresql';
import { tenantEm } from '../../platform/db/tenant.ts';
import { IvrFlow, VoicemailBox } from './voice.entities.ts';
import type { VoiceRouteTargetsPort } from './voice.ports.ts';

export function voiceRouteTargetsPort(orm: MikroORM): VoiceRouteTargetsPort {
  return {
    routeTargetExists: async (tenant, kind, id) => {
      const em = tenantEm(orm, tenant);
      return !!(kind === 'ivr' ? await em.findOne(IvrFlow, { id }, { fields: ['id'] }) : await em.findOne(VoicemailBox, { id }, { fields: ['id'] }));
    },
  };
}
