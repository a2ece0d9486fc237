/** The /v1/settings routes. */
import { PAGE_QUERY, pageQuery, route, type RawResponse } from '../../rest/route.ts';
import type { AuditLogEntry } from '../../platform/audit/audit.entities.ts';
import {
  createApiKeyOp, exportAuditLogsOp, getApiKeyOp, getAuditLogEntryOp, getIpAllowlistOp, getTeamMemberOp, listApiKeysOp,
  listAuditLogsOp, listTeamOp, revokeApiKeyOp, setIpAllowlistOp, viewerOp, setGraphqlTrustedDocumentsOnlyOp,
  uploadGraphqlDocumentsOp, listGraphqlDocumentsOp, deleteGraphqlDocumentOp,
} from './settings.operations.ts';
import { auditLogsToCsv, presentGraphqlDocument, presentGraphqlDocuments, presentApiKey, presentAuditLogEntry, presentTeamMember, presentViewer } from './settings.presenters.ts';

export const settingsRoutes = [
  route({ method: 'GET', path: '/v1/settings/organization', operation: viewerOp, output: presentViewer }),
  route({
    method: 'PATCH', path: '/v1/settings/organization', operation: setGraphqlTrustedDocumentsOnlyOp,
    input: (r) => ({ graphql_trusted_documents_only: r.body.graphql_trusted_documents_only }), output: presentViewer,
  }),
  // The body is the client preset's persisted-documents.json as it is (id → document text).
  route({ method: 'POST', path: '/v1/graphql/documents', operation: uploadGraphqlDocumentsOp, input: (r) => r.body, output: presentGraphqlDocuments }),
  route({ method: 'GET', path: '/v1/graphql/documents', operation: listGraphqlDocumentsOp, output: presentGraphqlDocuments }),
  route({ method: 'DELETE', path: '/v1/graphql/documents/{id}', operation: deleteGraphqlDocumentOp, input: (r) => r.params, output: presentGraphqlDocument, resource: 'gqd' }),
  route({ method: 'GET', path: '/v1/settings/team', operation: listTeamOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentTeamMember }),
  route({ method: 'GET', path: '/v1/settings/team/{id}', operation: getTeamMemberOp, input: (r) => r.params, output: presentTeamMember, resource: 'mem' }),
  route({
    method: 'GET', path: '/v1/settings/api-keys', operation: listApiKeysOp, query: [...PAGE_QUERY, 'mode'],
    input: (r) => ({ ...pageQuery(r.query), mode: r.query.mode }), paginated: true, output: presentApiKey,
  }),
  route({
    method: 'POST', path: '/v1/settings/api-keys', operation: createApiKeyOp, status: 201,
    input: (r) => ({ name: r.body.name, role: r.body.role, mode: r.body.mode }),
    output: (res: { apiKey: Parameters<typeof presentApiKey>[0]; key: string }) => ({ ...presentApiKey(res.apiKey), key: res.key }),
  }),
  route({ method: 'GET', path: '/v1/settings/api-keys/{id}', operation: getApiKeyOp, input: (r) => r.params, output: presentApiKey, resource: 'key' }),
  route({ method: 'DELETE', path: '/v1/settings/api-keys/{id}', operation: revokeApiKeyOp, input: (r) => r.params, output: presentApiKey, resource: 'key' }),
  route({ method: 'GET', path: '/v1/settings/ip-allowlist', operation: getIpAllowlistOp, output: (entries: string[]) => ({ entries }) }),
  route({
    method: 'PUT', path: '/v1/settings/ip-allowlist', operation: setIpAllowlistOp,
    input: (r) => ({ entries: r.body.entries }), output: (entries: string[]) => ({ entries }),
  }),
  route({ method: 'GET', path: '/v1/settings/audit-logs', operation: listAuditLogsOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentAuditLogEntry }),
  route({
    method: 'GET', path: '/v1/settings/audit-logs/export', operation: exportAuditLogsOp, query: ['format', 'date_range'],
    input: (r) => ({ format: r.query.format, dateRange: r.query.date_range }),
    output: (entries: AuditLogEntry[], r): unknown => {
      if (r.query.format !== 'csv') return entries.map(presentAuditLogEntry);
      const raw: RawResponse = { raw: true, status: 200, contentType: 'text/csv; charset=utf-8', body: auditLogsToCsv(entries), headers: { 'Content-Disposition': 'attachment; filename="audit-log.csv"' } };
      return raw;
    },
  }),
  route({ method: 'GET', path: '/v1/settings/audit-logs/{id}', operation: getAuditLogEntryOp, input: (r) => r.params, output: presentAuditLogEntry, resource: 'aud' }),
];
