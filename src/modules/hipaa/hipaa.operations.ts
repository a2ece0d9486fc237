/** The HIPAA settings as operations (roles as the spec's Authentication item 3 gives them). */
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import { ADMINS, OWNER_ONLY } from '../../platform/auth/roles.ts';
import { pageInput } from '../../platform/inputs.ts';
import type { HipaaService } from './hipaa.service.ts';
import { baaUpdateInput, hipaaUpdateInput } from './hipaa.schemas.ts';

export type HipaaServices = { hipaa: HipaaService };
const op = operationsOf<HipaaServices>('hipaa');

export const getHipaaOp = op({
  name: 'hipaa.get', endpoint: 'GET /v1/settings/hipaa', roles: ADMINS, input: z.object({}),
  run: (ctx, _input, s) => s.hipaa.get(ctx.scope),
});
export const updateHipaaOp = op({
  name: 'hipaa.update', endpoint: 'PUT /v1/settings/hipaa', roles: OWNER_ONLY, input: hipaaUpdateInput,
  run: (ctx, input, s) => s.hipaa.update(ctx.scope, input),
});
export const updateBaaOp = op({
  name: 'hipaa.updateBaa', endpoint: 'PUT /v1/settings/hipaa/baa', roles: OWNER_ONLY, input: baaUpdateInput,
  run: (ctx, input, s) => s.hipaa.updateBaa(ctx.scope, input),
});
export const listPhiAccessLogOp = op({
  name: 'hipaa.listPhiAccessLog', endpoint: 'GET /v1/settings/hipaa/phi-access-log', roles: ADMINS, input: pageInput,
  run: (ctx, input, s) => s.hipaa.listAccessLog(ctx.scope, input),
});
