/** Access fixtures of the compliance module: 10DLC brands and campaigns (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

const brandBody = {
  company_name: 'Acme', ein: '12-3456789', country: 'US', entity_type: 'private_profit', vertical: 'retail', contact_email: 'ops@acme.test', contact_phone: '+14155550100',
};
const tenDlcBody = {
  use_case: 'marketing', description: 'Weekly offers for members of the Acme loyalty club (fixture).', sample_messages: ['Acme: 20% off today. Reply STOP to opt out.'],
  message_flow: 'Members opt in on the web form when they join the loyalty club.', opt_in_type: 'web_form',
};

export default defineAccessFixtures(({ t, a, tick, makeFixture }) => ({
  fixtures: {
    brand: async () => (await t.rest('POST', '/v1/compliance/brands', { key: a.testKey, body: brandBody })).body.data.id,
    dlc: async () => {
      const [brand, num] = [await makeFixture('brand'), await makeFixture('num')];
      tick();
      return (await t.rest('POST', '/v1/compliance/campaigns', { key: a.testKey, body: { ...tenDlcBody, brand_id: brand, number_ids: [num] } })).body.data.id;
    },
  },
  restBodies: {
    'POST /v1/compliance/brands': brandBody,
    'POST /v1/compliance/campaigns': { ...tenDlcBody, brand_id: 'brand_01jd0000000000000000000000', number_ids: ['num_01jd0000000000000000000000'] },
  },
  gqlSamples: {
    'Query.complianceBrands': { doc: '{ complianceBrands(first: 1) { edges { cursor } } }' },
    'Query.complianceBrand': { doc: 'query($id: ID!) { complianceBrand(id: $id) { id } }', resource: 'brand' },
    'Query.tenDlcCampaigns': { doc: '{ tenDlcCampaigns(first: 1) { edges { cursor } } }' },
    'Query.tenDlcCampaign': { doc: 'query($id: ID!) { tenDlcCampaign(id: $id) { id } }', resource: 'dlc' },
    'Mutation.createComplianceBrand': {
      doc: 'mutation { createComplianceBrand(input: { companyName: "Acme", ein: "12-3456789", country: "US", entityType: private_profit, vertical: retail, contactEmail: "a@acme.test", contactPhone: "+14155550100" }) { id } }',
    },
    'Mutation.createTenDlcCampaign': {
      doc: `mutation { createTenDlcCampaign(input: { brandId: "brand_01jd0000000000000000000000", useCase: marketing, description: "${tenDlcBody.description}", sampleMessages: ["${tenDlcBody.sample_messages[0]}"], messageFlow: "${tenDlcBody.message_flow}", optInType: web_form, numberIds: ["num_01jd0000000000000000000000"] }) { id } }`,
    },
  },
}));
