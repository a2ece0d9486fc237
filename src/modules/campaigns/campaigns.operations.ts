/** The campaign use cases as operations (roles, rate-limit endpoint, input), shared by REST and GraphQL. */
import { LIMITS } from '../../platform/ratelimit/plans.ts';
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import type { CampaignsService } from './campaigns.service.ts';
import type { CampaignStatsReader } from './campaigns.stats.ts';
import { createCampaignInput, listCampaignsInput, updateCampaignInput } from './campaigns.schemas.ts';

export type CampaignsServices = { campaigns: CampaignsService; campaignStats: CampaignStatsReader };
const op = operationsOf<CampaignsServices>('campaigns');

export const createCampaignOp = op({
  name: 'campaigns.create', endpoint: 'POST /v1/campaigns', limits: LIMITS.fewWrites, roles: BUILDERS, input: createCampaignInput,
  run: (ctx, input, s) => s.campaigns.create(ctx.scope, input),
});
export const listCampaignsOp = op({
  name: 'campaigns.list', endpoint: 'GET /v1/campaigns', roles: READERS, input: listCampaignsInput,
  run: (ctx, input, s) => s.campaigns.list(ctx.scope, input),
});
export const getCampaignOp = op({
  name: 'campaigns.get', endpoint: 'GET /v1/campaigns/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.get(ctx.scope, input.id),
});
/** Details with live progress (REST GET answers with both). */
export const getCampaignWithStatsOp = op({
  name: 'campaigns.getWithStats', endpoint: 'GET /v1/campaigns/{id}', roles: READERS, input: idInput,
  run: async (ctx, input, s) => {
    const campaign = await s.campaigns.get(ctx.scope, input.id);
    return { campaign, stats: await s.campaignStats.forCampaign(ctx.scope, campaign) };
  },
});
export const updateCampaignOp = op({
  name: 'campaigns.update', endpoint: 'PUT /v1/campaigns/{id}', roles: BUILDERS, input: updateCampaignInput,
  run: (ctx, { id, ...patch }, s) => s.campaigns.update(ctx.scope, id, patch),
});
export const deleteCampaignOp = op({
  name: 'campaigns.delete', endpoint: 'DELETE /v1/campaigns/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.remove(ctx.scope, input.id),
});
export const sendCampaignOp = op({
  name: 'campaigns.send', endpoint: 'POST /v1/campaigns/{id}/send', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.send(ctx.scope, input.id),
});
export const pauseCampaignOp = op({
  name: 'campaigns.pause', endpoint: 'POST /v1/campaigns/{id}/pause', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.pause(ctx.scope, input.id),
});
export const resumeCampaignOp = op({
  name: 'campaigns.resume', endpoint: 'POST /v1/campaigns/{id}/resume', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.resume(ctx.scope, input.id),
});
export const cancelCampaignOp = op({
  name: 'campaigns.cancel', endpoint: 'POST /v1/campaigns/{id}/cancel', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.campaigns.cancel(ctx.scope, input.id),
});
export const campaignStatsOp = op({
  name: 'campaigns.stats', endpoint: 'GET /v1/campaigns/stats', roles: READERS, input: z.object({}),
  run: (ctx, _input, s) => s.campaignStats.forOrganization(ctx.scope),
});
