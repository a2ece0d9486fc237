/** Access fixtures of the campaigns module: campaigns (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a, tick, makeFixture }) => ({
  fixtures: {
    cmp: async () => {
      const list = await makeFixture('lst');
      tick();
      return (await t.rest('POST', '/v1/campaigns', { key: a.testKey, body: { name: 'fixture', channel: 'sms', list_id: list, body: 'Hi. Reply STOP' } })).body.data.id;
    },
  },
  restBodies: {
    // A list that does not exist: 404 for the allowed roles (the matrix only tells 403 apart).
    'POST /v1/campaigns': { name: 'matrix', channel: 'sms', list_id: 'lst_01jd0000000000000000000000', body: 'hi' },
    'PUT /v1/campaigns/{id}': { name: 'matrix' },
    'POST /v1/campaigns/{id}/send': {},
    'POST /v1/campaigns/{id}/pause': {},
    'POST /v1/campaigns/{id}/resume': {},
    'POST /v1/campaigns/{id}/cancel': {},
  },
  gqlSamples: {
    'Query.campaigns': { doc: '{ campaigns(first: 1, search: "x") { edges { cursor } } }' },
    'Query.campaign': { doc: 'query($id: ID!) { campaign(id: $id) { id stats { sent } } }', resource: 'cmp' },
    'Query.campaignStats': { doc: '{ campaignStats { campaigns sent } }' },
    'Mutation.createCampaign': { doc: 'mutation { createCampaign(input: { name: "x", channel: sms, listId: "lst_01jd0000000000000000000000", body: "hi" }) { id } }' },
    'Mutation.updateCampaign': { doc: 'mutation($id: ID!) { updateCampaign(id: $id, input: { name: "x" }) { id } }', resource: 'cmp' },
    'Mutation.deleteCampaign': { doc: 'mutation($id: ID!) { deleteCampaign(id: $id) }', resource: 'cmp' },
    'Mutation.sendCampaign': { doc: 'mutation($id: ID!) { sendCampaign(id: $id) { id } }', resource: 'cmp' },
    'Mutation.pauseCampaign': { doc: 'mutation($id: ID!) { pauseCampaign(id: $id) { id } }', resource: 'cmp' },
    'Mutation.resumeCampaign': { doc: 'mutation($id: ID!) { resumeCampaign(id: $id) { id } }', resource: 'cmp' },
    'Mutation.cancelCampaign': { doc: 'mutation($id: ID!) { cancelCampaign(id: $id) { id } }', resource: 'cmp' },
  },
}));
