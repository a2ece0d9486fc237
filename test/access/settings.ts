/** Access fixtures of the settings module: API keys, team members, audit logs and the IP allowlist (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a }) => ({
  fixtures: {
    key: async () => (await t.rest('POST', '/v1/settings/api-keys', { key: a.testKey, body: { role: 'viewer', name: 'fixture' } })).body.data.id,
    mem: async () => (await t.rest('GET', '/v1/settings/team', { key: a.testKey })).body.data[0].id,
    gqd: async () => (await t.rest('POST', '/v1/graphql/documents', { key: a.testKey, body: { [`fixture-${Math.random()}`]: '{ viewer { role } }' } })).body.data[0].id,
    aud: async () => (await t.rest('GET', '/v1/settings/audit-logs', { key: a.testKey })).body.data[0].id,
  },
  restBodies: {
    'POST /v1/settings/api-keys': { role: 'viewer', name: 'matrix' },
    'PUT /v1/settings/ip-allowlist': { entries: [] },
    // Off: the matrix's other GraphQL requests send document texts.
    'PATCH /v1/settings/organization': { graphql_trusted_documents_only: false },
    'POST /v1/graphql/documents': { matrix: '{ viewer { role } }' },
  },
  gqlSamples: {
    'Query.viewer': { doc: '{ viewer { role } }' },
    'Query.rateLimit': { doc: '{ rateLimit(fields: ["Query.viewer"]) { costLimit windows { remaining } } }' },
    'Query.teamMembers': { doc: '{ teamMembers(first: 1) { edges { cursor } } }' },
    'Query.apiKeys': { doc: '{ apiKeys(first: 1) { edges { cursor } } }' },
    'Query.ipAllowlist': { doc: '{ ipAllowlist }' },
    'Query.auditLogs': { doc: '{ auditLogs(first: 1) { edges { cursor } } }' },
    'Query.auditLogExport': { doc: '{ auditLogExport(format: json) { count } }' },
    'Mutation.createApiKey': { doc: 'mutation { createApiKey(input: { role: viewer }) { key } }' },
    'Mutation.revokeApiKey': { doc: 'mutation($id: ID!) { revokeApiKey(id: $id) { id } }', resource: 'key' },
    'Query.graphqlDocuments': { doc: '{ graphqlDocuments { id } }' },
    'Mutation.setGraphqlTrustedDocumentsOnly': { doc: 'mutation { setGraphqlTrustedDocumentsOnly(enabled: false) { role } }' },
    'Mutation.uploadGraphqlDocuments': { doc: 'mutation { uploadGraphqlDocuments(documents: { matrix: "{ viewer { role } }" }) { id } }' },
    'Mutation.deleteGraphqlDocument': { doc: 'mutation($id: String!) { deleteGraphqlDocument(id: $id) { id } }', resource: 'gqd' },
    'Mutation.setIpAllowlist': { doc: 'mutation { setIpAllowlist(entries: []) }' },
  },
}));
