/** The /v1/campaigns routes (the spec's, plus cancel). `stats` is matched before `{id}`. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import {
  campaignStatsOp, cancelCampaignOp, createCampaignOp, deleteCampaignOp, getCampaignWithStatsOp, listCampaignsOp, pauseCampaignOp,
  resumeCampaignOp, sendCampaignOp, updateCampaignOp,
} from './campaigns.operations.ts';
import { presentCampaign, presentCampaignWithStats } from './campaigns.presenters.ts';

const byId = (r: { params: Record<string, string> }) => r.params;

export const campaignRoutes = [
  route({ method: 'POST', path: '/v1/campaigns', operation: createCampaignOp, status: 201, input: (r) => r.body, output: presentCampaign }),
  route({
    method: 'GET', path: '/v1/campaigns', operation: listCampaignsOp, query: [...PAGE_QUERY, 'search', 'status', 'channel'],
    input: (r) => ({ ...pageQuery(r.query), search: r.query.search, status: r.query.status, channel: r.query.channel }),
    paginated: true, output: presentCampaign,
  }),
  route({ method: 'GET', path: '/v1/campaigns/stats', operation: campaignStatsOp }),
  route({ method: 'GET', path: '/v1/campaigns/{id}', operation: getCampaignWithStatsOp, input: byId, output: presentCampaignWithStats, resource: 'cmp' }),
  route({ method: 'PUT', path: '/v1/campaigns/{id}', operation: updateCampaignOp, input: (r) => ({ ...r.body, ...r.params }), output: presentCampaign, resource: 'cmp' }),
  route({ method: 'DELETE', path: '/v1/campaigns/{id}', operation: deleteCampaignOp, input: byId, status: 204, resource: 'cmp' }),
  route({ method: 'POST', path: '/v1/campaigns/{id}/send', operation: sendCampaignOp, input: byId, output: presentCampaign, resource: 'cmp' }),
  route({ method: 'POST', path: '/v1/campaigns/{id}/pause', operation: pauseCampaignOp, input: byId, output: presentCampaign, resource: 'cmp' }),
  route({ method: 'POST', path: '/v1/campaigns/{id}/resume', operation: resumeCampaignOp, input: byId, output: presentCampaign, resource: 'cmp' }),
  route({ method: 'POST', path: '/v1/campaigns/{id}/cancel', operation: cancelCampaignOp, input: byId, output: presentCampaign, resource: 'cmp' }),
];
