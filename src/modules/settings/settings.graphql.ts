/** GraphQL twins of the settings routes: organization, team, API keys, IP allowlist, audit log. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { ROLES } from '../../platform/auth/roles.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { PLANS, type ApiKey, type Organization } from '../../platform/tenancy/tenancy.entities.ts';
import { MODES } from '../../platform/db/tenant.ts';
import type { AuditLogEntry } from '../../platform/audit/audit.entities.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { TeamMemberView } from './settings.service.ts';
import {
  createApiKeyOp, exportAuditLogsOp, getApiKeyOp, getAuditLogEntryOp, getIpAllowlistOp, getTeamMemberOp, listApiKeysOp,
  listAuditLogsOp, listTeamOp, revokeApiKeyOp, setIpAllowlistOp, viewerOp, setGraphqlTrustedDocumentsOnlyOp,
  uploadGraphqlDocumentsOp, listGraphqlDocumentsOp, deleteGraphqlDocumentOp,
} from './settings.operations.ts';
import type { PersistedDocument } from './settings.documents.ts';
import { auditLogsToCsv, presentAuditLogEntry } from './settings.presenters.ts';
import { AUDIT_EXPORT_FORMATS, type AuditExportFormat as ExportFormat } from './settings.schemas.ts';

const RoleEnum = builder.enumType('Role', { values: ROLES });
const ModeEnum = builder.enumType('Mode', { values: MODES });
const PlanEnum = builder.enumType('Plan', { values: PLANS });
const AuditExportFormat = builder.enumType('AuditExportFormat', { values: AUDIT_EXPORT_FORMATS });

export const OrganizationRef = builder.node(builder.objectRef<Organization>('Organization'), {
  id: { resolve: (o) => o.id },
  loadOne: async (id, ctx) => {
    if (id !== ctx.scope.organizationId) throw new ServiceError('NOT_FOUND', 'Organization not found', { id });
    return (await run(viewerOp, ctx, {})).organization;
  },
  fields: (t) => ({
    name: t.exposeString('name'),
    plan: t.field({ type: PlanEnum, resolve: (o) => o.plan }),
    graphqlTrustedDocumentsOnly: t.boolean({
      description: '/graphql accepts only trusted documents\' ids (uploadGraphqlDocuments), never a document text',
      resolve: (o) => o.graphqlTrustedDocumentsOnly ?? false,
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ApiKeyRef = builder.node(builder.objectRef<ApiKey>('ApiKey'), {
  id: { resolve: (k) => k.id },
  loadOne: (id, ctx) => run(getApiKeyOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name', { nullable: true }),
    role: t.field({ type: RoleEnum, resolve: (k) => k.role }),
    mode: t.field({ type: ModeEnum, resolve: (k) => k.mode }),
    prefix: t.exposeString('prefix'),
    last4: t.exposeString('last4'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
  }),
});

const TeamMemberRef = builder.node(builder.objectRef<TeamMemberView>('TeamMember'), {
  id: { resolve: (m) => m.id },
  loadOne: (id, ctx) => run(getTeamMemberOp, ctx, { id }),
  fields: (t) => ({
    userId: t.exposeString('userId'),
    email: t.exposeString('email'),
    name: t.exposeString('name', { nullable: true }),
    role: t.field({ type: RoleEnum, resolve: (m) => m.role }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const AuditLogEntryRef = builder.node(builder.objectRef<AuditLogEntry>('AuditLogEntry'), {
  id: { resolve: (e) => e.id },
  loadOne: (id, ctx) => run(getAuditLogEntryOp, ctx, { id }),
  fields: (t) => ({
    actorType: t.exposeString('actorType'),
    actorId: t.exposeString('actorId', { nullable: true }),
    action: t.exposeString('action'),
    resourceType: t.exposeString('resourceType', { nullable: true }),
    resourceId: t.exposeString('resourceId', { nullable: true }),
    ip: t.exposeString('ip', { nullable: true }),
    requestId: t.exposeString('requestId', { nullable: true }),
    details: t.expose('details', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ViewerRef = builder.objectRef<{ organization: Organization; scope: Scope }>('Viewer').implement({
  description: 'The caller: its organization, role, mode and credential',
  fields: (t) => ({
    organization: t.field({ type: OrganizationRef, resolve: (v) => v.organization }),
    role: t.field({ type: RoleEnum, resolve: (v) => v.scope.role }),
    mode: t.field({ type: ModeEnum, resolve: (v) => v.scope.mode }),
    actorType: t.string({ resolve: (v) => v.scope.actor.type }),
    actorId: t.string({ resolve: (v) => v.scope.actor.id }),
  }),
});

const CreateApiKeyPayload = builder.objectRef<{ apiKey: ApiKey; key: string }>('CreateApiKeyPayload').implement({
  fields: (t) => ({
    apiKey: t.field({ type: ApiKeyRef, resolve: (p) => p.apiKey }),
    key: t.exposeString('key', { description: 'The full secret key. Shown only in this response.' }),
  }),
});

const AuditLogExport = builder.objectRef<{ format: ExportFormat; entries: AuditLogEntry[] }>('AuditLogExport').implement({
  fields: (t) => ({
    format: t.field({ type: AuditExportFormat, resolve: (e) => e.format }),
    count: t.int({ resolve: (e) => e.entries.length }),
    contentType: t.string({ resolve: (e) => (e.format === 'csv' ? 'text/csv' : 'application/json') }),
    content: t.string({ resolve: (e) => (e.format === 'csv' ? auditLogsToCsv(e.entries) : JSON.stringify(e.entries.map(presentAuditLogEntry))) }),
  }),
});

const GraphqlDocumentRef = builder.objectRef<PersistedDocument>('GraphqlDocument').implement({
  description: 'A trusted document: /graphql runs it when a request names its id (`documentId`)',
  fields: (t) => ({
    id: t.exposeString('id'),
    document: t.exposeString('document'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CreateApiKeyInput = builder.inputType('CreateApiKeyInput', {
  fields: (t) => ({
    name: t.string({ required: false }),
    role: t.field({ type: RoleEnum, required: true }),
    mode: t.field({ type: ModeEnum, required: false, description: "Defaults to the caller's mode" }),
  }),
});

builder.queryFields((t) => ({
  viewer: t.field({
    type: ViewerRef, ...guard('Query', 'viewer', viewerOp),
    resolve: (_r, _a, ctx) => run(viewerOp, ctx, {}),
  }),
  teamMembers: t.connection({
    type: TeamMemberRef, ...guard('Query', 'teamMembers', listTeamOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listTeamOp, ctx, pageRequest(args))),
  }),
  apiKeys: t.connection({
    type: ApiKeyRef, ...guard('Query', 'apiKeys', listApiKeysOp),
    args: { mode: t.arg({ type: ModeEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listApiKeysOp, ctx, { ...pageRequest(args), mode: args.mode })),
  }),
  ipAllowlist: t.stringList({
    ...guard('Query', 'ipAllowlist', getIpAllowlistOp),
    resolve: (_r, _a, ctx) => run(getIpAllowlistOp, ctx, {}),
  }),
  auditLogs: t.connection({
    type: AuditLogEntryRef, ...guard('Query', 'auditLogs', listAuditLogsOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listAuditLogsOp, ctx, pageRequest(args))),
  }),
  graphqlDocuments: t.field({
    type: [GraphqlDocumentRef], ...guard('Query', 'graphqlDocuments', listGraphqlDocumentsOp),
    description: 'The trusted documents uploaded for this organization, by id',
    resolve: (_r, _a, ctx) => run(listGraphqlDocumentsOp, ctx, {}),
  }),
  auditLogExport: t.field({
    type: AuditLogExport, ...guard('Query', 'auditLogExport', exportAuditLogsOp),
    args: {
      format: t.arg({ type: AuditExportFormat, required: false }),
      dateRange: t.arg.string({ required: false, description: 'Days back, e.g. 90d (at most 90d)' }),
    },
    resolve: async (_r, args, ctx) => {
      const format = args.format ?? 'json';
      const entries = await run(exportAuditLogsOp, ctx, { format, dateRange: args.dateRange ?? undefined });
      return { format, entries };
    },
  }),
}));

builder.mutationFields((t) => ({
  createApiKey: t.field({
    type: CreateApiKeyPayload, ...guard('Mutation', 'createApiKey', createApiKeyOp),
    args: { input: t.arg({ type: CreateApiKeyInput, required: true }) },
    resolve: (_r, args, ctx) => run(createApiKeyOp, ctx, args.input),
  }),
  revokeApiKey: t.field({
    type: ApiKeyRef, ...guard('Mutation', 'revokeApiKey', revokeApiKeyOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(revokeApiKeyOp, ctx, { id: String(args.id) }),
  }),
  setGraphqlTrustedDocumentsOnly: t.field({
    type: ViewerRef, ...guard('Mutation', 'setGraphqlTrustedDocumentsOnly', setGraphqlTrustedDocumentsOnlyOp),
    args: { enabled: t.arg.boolean({ required: true }) },
    resolve: (_r, args, ctx) => run(setGraphqlTrustedDocumentsOnlyOp, ctx, { graphql_trusted_documents_only: args.enabled }),
  }),
  uploadGraphqlDocuments: t.field({
    type: [GraphqlDocumentRef], ...guard('Mutation', 'uploadGraphqlDocuments', uploadGraphqlDocumentsOp),
    description: "Stores a persisted-documents manifest (id → document text, as graphql-codegen's client preset emits it) as trusted documents",
    args: { documents: t.arg({ type: 'JSON', required: true }) },
    resolve: (_r, args, ctx) => run(uploadGraphqlDocumentsOp, ctx, args.documents as Record<string, string>),
  }),
  deleteGraphqlDocument: t.field({
    type: GraphqlDocumentRef, ...guard('Mutation', 'deleteGraphqlDocument', deleteGraphqlDocumentOp),
    args: { id: t.arg.string({ required: true }) },
    resolve: (_r, args, ctx) => run(deleteGraphqlDocumentOp, ctx, { id: args.id }),
  }),
  setIpAllowlist: t.stringList({
    ...guard('Mutation', 'setIpAllowlist', setIpAllowlistOp),
    args: { entries: t.arg.stringList({ required: true }) },
    resolve: (_r, args, ctx) => run(setIpAllowlistOp, ctx, { entries: args.entries }),
  }),
}));

