/** Access fixtures of the flows module: flows, their versions and executions (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

const flowBody = () => ({
  name: 'matrix', trigger: { type: 'api' },
  definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'e', type: 'end' }], edges: [{ from: 't', to: 'e' }] },
});

export default defineAccessFixtures(({ t, a, tick, makeFixture }) => ({
  fixtures: {
    flw: async () => (await t.rest('POST', '/v1/flows', { key: a.testKey, body: flowBody() })).body.data.id,
    fex: async () => (await t.rest('POST', `/v1/flows/${await makeFixture('flw')}/executions`, { key: a.testKey, body: { input: {} } })).body.data.id,
    // Routes with two path parameters: the fixture gives both, space-separated (see fillPath in kit.ts).
    'flw+fex': async () => {
      const flow = await makeFixture('flw');
      tick();
      return `${flow} ${(await t.rest('POST', `/v1/flows/${flow}/executions`, { key: a.testKey, body: { input: {} } })).body.data.id}`;
    },
    'flw+version': async () => `${await makeFixture('flw')} 1`,
  },
  restBodies: {
    'POST /v1/flows': flowBody,
    'PUT /v1/flows/{id}': { name: 'matrix' },
    'POST /v1/flows/{id}/executions': { input: {} },
    'POST /v1/flows/{id}/executions/{executionId}/cancel': {},
  },
  gqlSamples: {
    'Query.flows': { doc: '{ flows(first: 1) { edges { cursor } } }' },
    'Query.flow': { doc: 'query($id: ID!) { flow(id: $id) { id version } }', resource: 'flw' },
    'Query.flowVersions': { doc: 'query($id: ID!) { flowVersions(flowId: $id, first: 1) { edges { cursor } } }', resource: 'flw' },
    'Query.flowVersion': { doc: 'query($id: ID!) { flowVersion(flowId: $id, version: 1) { version } }', resource: 'flw' },
    'Query.flowExecutions': { doc: '{ flowExecutions(first: 1) { edges { cursor } } }' },
    'Query.flowExecution': { doc: 'query($id: ID!) { flowExecution(id: $id) { id status } }', resource: 'fex' },
    'Mutation.createFlow': { doc: 'mutation($input: CreateFlowInput!) { createFlow(input: $input) { id } }', vars: () => ({ input: flowBody() }) },
    'Mutation.updateFlow': { doc: 'mutation($id: ID!) { updateFlow(id: $id, input: { name: "x" }) { version } }', resource: 'flw' },
    'Mutation.deleteFlow': { doc: 'mutation($id: ID!) { deleteFlow(id: $id) }', resource: 'flw' },
    'Mutation.startFlowExecution': { doc: 'mutation($id: ID!) { startFlowExecution(flowId: $id, input: {}) { id } }', resource: 'flw' },
    'Mutation.cancelFlowExecution': { doc: 'mutation($id: ID!) { cancelFlowExecution(id: $id) { status } }', resource: 'fex' },
  },
}));
