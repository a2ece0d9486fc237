/** The settings use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import type { SettingsService } from './settings.service.ts';
import type { GraphqlDocuments } from './settings.documents.ts';
import { ADMINS, BUILDERS, EVERY_ROLE, OWNER_ONLY } from '../../platform/auth/roles.ts';
import { auditExportInput, createApiKeyInput, ipAllowlistInput } from './settings.schemas.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import { MODES } from '../../platform/db/tenant.ts';

/** The services this module's operations run on. */
export type SettingsServices = { settings: SettingsService; graphqlDocuments: GraphqlDocuments };
const op = operationsOf<SettingsServices>('settings');

export const viewerOp = op({
  name: 'settings.viewer', endpoint: 'GET /v1/settings/organization', roles: EVERY_ROLE, input: z.object({}),
  run: async (ctx, _input, s) => ({ organization: await s.settings.currentOrganization(ctx.scope), scope: ctx.scope }),

});

export const listTeamOp = op({
  name: 'settings.listTeam', endpoint: 'GET /v1/settings/team', roles: EVERY_ROLE, input: pageInput,
  run: (ctx, input, s) => s.settings.listTeam(ctx.scope, input),
});

export const listApiKeysOp = op({
  name: 'settings.listApiKeys', endpoint: 'GET /v1/settings/api-keys', roles: BUILDERS,
  input: pageInput.extend({ mode: z.enum(MODES).nullish() }),
  run: (ctx, input, s) => s.settings.listApiKeys(ctx.scope, input),
});

export const createApiKeyOp = op({
  name: 'settings.createApiKey', endpoint: 'POST /v1/settings/api-keys', roles: ADMINS, input: createApiKeyInput,
  run: (ctx, input, s) => s.settings.createApiKey(ctx.scope, input),
});

export const revokeApiKeyOp = op({
  name: 'settings.revokeApiKey', endpoint: 'DELETE /v1/settings/api-keys/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.settings.revokeApiKey(ctx.scope, input.id),
});

export const getIpAllowlistOp = op({
  name: 'settings.getIpAllowlist', endpoint: 'GET /v1/settings/ip-allowlist', roles: ADMINS, input: z.object({}),
  run: (ctx, _input, s) => s.settings.getIpAllowlist(ctx.scope),
});

export const setIpAllowlistOp = op({
  name: 'settings.setIpAllowlist', endpoint: 'PUT /v1/settings/ip-allowlist', roles: ADMINS, input: ipAllowlistInput,
  run: (ctx, input, s) => s.settings.setIpAllowlist(ctx.scope, input.entries),
});

export const listAuditLogsOp = op({
  name: 'settings.listAuditLogs', endpoint: 'GET /v1/settings/audit-logs', roles: ADMINS, input: pageInput,
  run: (ctx, input, s) => s.settings.listAuditLogs(ctx.scope, input),
});

export const exportAuditLogsOp = op({
  name: 'settings.exportAuditLogs', endpoint: 'GET /v1/settings/audit-logs/export', roles: ADMINS, input: auditExportInput,
  run: (ctx, input, s) => s.settings.exportAuditLogs(ctx.scope, input),
});

export const getApiKeyOp = op({
  name: 'settings.getApiKey', endpoint: 'GET /v1/settings/api-keys/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.settings.getApiKey(ctx.scope, input.id),
});

export const getTeamMemberOp = op({
  name: 'settings.getTeamMember', endpoint: 'GET /v1/settings/team/{id}', roles: EVERY_ROLE, input: idInput,
  run: (ctx, input, s) => s.settings.getTeamMember(ctx.scope, input.id),
});

export const getAuditLogEntryOp = op({
  name: 'settings.getAuditLogEntry', endpoint: 'GET /v1/settings/audit-logs/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.settings.getAuditLogEntry(ctx.scope, input.id),
});

export const setGraphqlTrustedDocumentsOnlyOp = op({
  name: 'settings.setGraphqlTrustedDocumentsOnly', endpoint: 'PATCH /v1/settings/organization', roles: OWNER_ONLY,
  input: z.object({ graphql_trusted_documents_only: z.boolean() }),
  run: async (ctx, input, s) => ({ organization: await s.settings.setGraphqlTrustedDocumentsOnly(ctx.scope, input.graphql_trusted_documents_only), scope: ctx.scope }),
});

/** The manifest the graphql-codegen client preset emits (`persistedDocuments`), as it is: id → document text. */
const manifestInput = z.record(z.string().min(1).max(200), z.string().min(1));

export const uploadGraphqlDocumentsOp = op({
  name: 'settings.uploadGraphqlDocuments', endpoint: 'POST /v1/graphql/documents', roles: OWNER_ONLY, input: manifestInput,
  run: (ctx, input, s) => s.graphqlDocuments.upload(ctx.scope.organizationId, input),
});

export const listGraphqlDocumentsOp = op({
  name: 'settings.listGraphqlDocuments', endpoint: 'GET /v1/graphql/documents', roles: BUILDERS, input: z.object({}),
  run: (ctx, _input, s) => s.graphqlDocuments.list(ctx.scope.organizationId),
});

export const deleteGraphqlDocumentOp = op({
  name: 'settings.deleteGraphqlDocument', endpoint: 'DELETE /v1/graphql/documents/{id}', roles: OWNER_ONLY, input: idInput,
  run: (ctx, input, s) => s.graphqlDocuments.remove(ctx.scope.organizationId, input.id),
});
