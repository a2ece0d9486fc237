/** Access fixtures of the agents module: AI agents and the marketplace (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

const AGENT = { name: 'fixture', type: 'task', model: 'sandbox-1', system_prompt: 'Be brief.' };

export default defineAccessFixtures(({ t, a, tick, unique, makeFixture }) => ({
  fixtures: {
    agt: async () => (await t.rest('POST', '/v1/agents', { key: a.testKey, body: AGENT })).body.data.id,
    // A listing pending review: installable by nobody yet (409 for its owner, 404 for others).
    mkt: async () => {
      const agent = await makeFixture('agt');
      tick();
      return (await t.rest('POST', '/v1/marketplace/agents', { key: a.testKey, body: { agent_id: agent, published_fields: ['system_prompt'], listing: { title: 'x', description: 'x', category: 'x' } } })).body.data.id;
    },
  },
  restBodies: {
    'POST /v1/agents': AGENT,
    'PUT /v1/agents/{id}': { name: 'matrix' },
    'PATCH /v1/agents/{id}': { description: 'matrix' },
    'POST /v1/agents/{id}/deploy': { channels: ['web'] },
    'POST /v1/agents/{id}/pause': {},
    'POST /v1/agents/{id}/resume': {},
    'POST /v1/agents/{id}/chat': { message: 'hi' },
    'POST /v1/agents/{id}/tools': () => ({ name: `t${unique()}`, endpoint: 'http://127.0.0.1:9/tool' }),
    'POST /v1/agents/{id}/knowledge': { type: 'txt', content: 'hello world' },
    'PATCH /v1/agents/{id}/guardrails': { content_filter: true },
    'POST /v1/agents/{id}/test': { message: 'hi' },
    'POST /v1/marketplace/agents/{templateId}/install': {},
    'POST /v1/marketplace/agents': { agent_id: 'agt_01jd0000000000000000000000', published_fields: ['system_prompt'], listing: { title: 'x', description: 'x', category: 'x' } },
  },
  gqlSamples: {
    'Query.agents': { doc: '{ agents(first: 1) { edges { cursor } } }' },
    'Query.agent': { doc: 'query($id: ID!) { agent(id: $id) { id } }', resource: 'agt' },
    'Query.agentConversations': { doc: 'query($id: ID!) { agentConversations(agentId: $id, first: 1) { edges { cursor } } }', resource: 'agt' },
    'Query.agentConversationMessages': { doc: 'query($id: ID!) { agentConversationMessages(agentId: $id, conversationId: "conv_01jd0000000000000000000000", first: 1) { edges { cursor } } }', resource: 'agt' },
    'Query.marketplaceAgents': { doc: '{ marketplaceAgents }' },
    'Mutation.createAgent': { doc: 'mutation { createAgent(input: { name: "x", type: task, model: "sandbox-1", systemPrompt: "Be brief." }) { agent { id } } }' },
    'Mutation.replaceAgent': { doc: 'mutation($id: ID!) { replaceAgent(id: $id, input: { name: "x" }) { id } }', resource: 'agt' },
    'Mutation.updateAgent': { doc: 'mutation($id: ID!) { updateAgent(id: $id, input: { description: "x" }) { id } }', resource: 'agt' },
    'Mutation.deleteAgent': { doc: 'mutation($id: ID!) { deleteAgent(id: $id) }', resource: 'agt' },
    'Mutation.deployAgent': { doc: 'mutation($id: ID!) { deployAgent(id: $id, channels: ["web"]) { id } }', resource: 'agt' },
    'Mutation.pauseAgent': { doc: 'mutation($id: ID!) { pauseAgent(id: $id) { id } }', resource: 'agt' },
    'Mutation.resumeAgent': { doc: 'mutation($id: ID!) { resumeAgent(id: $id) { id } }', resource: 'agt' },
    'Mutation.addAgentTool': { doc: 'mutation($id: ID!) { addAgentTool(id: $id, tool: { name: "human_handoff" }) { id } }', resource: 'agt' },
    'Mutation.updateAgentGuardrails': { doc: 'mutation($id: ID!) { updateAgentGuardrails(id: $id, guardrails: { content_filter: true }) { id } }', resource: 'agt' },
    'Mutation.uploadAgentKnowledge': { doc: 'mutation($id: ID!) { uploadAgentKnowledge(id: $id, type: "txt", content: "hello world") { id } }', resource: 'agt' },
    'Mutation.chatWithAgent': { doc: 'mutation($id: ID!) { chatWithAgent(agentId: $id, message: "hi") { content } }', resource: 'agt' },
    'Mutation.testAgent': { doc: 'mutation($id: ID!) { testAgent(id: $id, message: "hi") }', resource: 'agt' },
    'Mutation.installMarketplaceAgent': { doc: 'mutation { installMarketplaceAgent(templateId: "customer-survey") { agent { id } } }' },
    'Mutation.submitMarketplaceAgent': { doc: 'mutation($id: ID!) { submitMarketplaceAgent(agentId: $id, publishedFields: [system_prompt], listing: { title: "x", description: "x", category: "x" }) { id } }', resource: 'agt' },
  },
}));
