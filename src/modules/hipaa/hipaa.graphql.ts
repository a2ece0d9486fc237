/** GraphQL twins of the HIPAA settings routes, run through the same operations. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { BAA_STATUSES, PHI_REASONS, type ComplianceOfficer, type HipaaSettings, type PhiAccessLogEntry } from './hipaa.entities.ts';
import { getHipaaOp, listPhiAccessLogOp, updateBaaOp, updateHipaaOp } from './hipaa.operations.ts';

const BaaStatusEnum = builder.enumType('BaaStatus', { values: BAA_STATUSES });
export const PhiReasonEnum = builder.enumType('PhiReason', { values: PHI_REASONS });

const ComplianceOfficerRef = builder.objectRef<ComplianceOfficer>('ComplianceOfficer').implement({
  fields: (t) => ({ name: t.exposeString('name'), email: t.exposeString('email') }),
});

const HipaaSettingsRef = builder.objectRef<HipaaSettings>('HipaaSettings').implement({
  description: 'The organization\'s HIPAA mode, BAA, retention and compliance officer',
  fields: (t) => ({
    enabled: t.exposeBoolean('enabled'),
    baaStatus: t.field({ type: BaaStatusEnum, resolve: (s) => s.baaStatus }),
    baaSignedDate: t.string({ nullable: true, description: 'YYYY-MM-DD', resolve: (s) => (s.baaSignedAt ? s.baaSignedAt.toISOString().slice(0, 10) : null) }),
    baaDocumentUrl: t.exposeString('baaDocumentUrl', { nullable: true }),
    retentionDays: t.exposeInt('retentionDays'),
    complianceOfficer: t.field({ type: ComplianceOfficerRef, nullable: true, resolve: (s) => s.complianceOfficer }),
    phiMetadataFields: t.exposeStringList('phiMetadataFields'),
    enabledAt: t.expose('enabledAt', { type: 'DateTime', nullable: true }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const PhiAccessLogEntryRef = builder.objectRef<PhiAccessLogEntry>('PhiAccessLogEntry').implement({
  fields: (t) => ({
    id: t.exposeString('id'),
    actorType: t.exposeString('actorType'),
    actorId: t.exposeString('actorId'),
    role: t.exposeString('role'),
    reason: t.field({ type: PhiReasonEnum, nullable: true, resolve: (e) => e.reason }),
    resourceType: t.exposeString('resourceType'),
    resourceIds: t.exposeStringList('resourceIds'),
    fields: t.exposeStringList('fields'),
    operation: t.exposeString('operation'),
    mode: t.exposeString('mode'),
    ip: t.exposeString('ip', { nullable: true }),
    requestId: t.exposeString('requestId', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ComplianceOfficerInput = builder.inputType('ComplianceOfficerInput', {
  fields: (t) => ({ name: t.string({ required: true }), email: t.string({ required: true }) }),
});

builder.queryFields((t) => ({
  hipaaSettings: t.field({ type: HipaaSettingsRef, ...guard('Query', 'hipaaSettings', getHipaaOp), resolve: (_r, _a, ctx) => run(getHipaaOp, ctx, {}) }),
  phiAccessLog: t.connection({
    type: PhiAccessLogEntryRef, ...guard('Query', 'phiAccessLog', listPhiAccessLogOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listPhiAccessLogOp, ctx, pageRequest(args))),
  }),
}));

builder.mutationFields((t) => ({
  updateHipaaSettings: t.field({
    type: HipaaSettingsRef, ...guard('Mutation', 'updateHipaaSettings', updateHipaaOp),
    args: {
      enabled: t.arg.boolean(),
      retentionDays: t.arg.int(),
      complianceOfficer: t.arg({ type: ComplianceOfficerInput }),
      phiMetadataFields: t.arg.stringList(),
    },
    resolve: (_r, a, ctx) => run(updateHipaaOp, ctx, {
      enabled: a.enabled, retention_days: a.retentionDays, compliance_officer: a.complianceOfficer, phi_metadata_fields: a.phiMetadataFields,
    }),
  }),
  updateHipaaBaa: t.field({
    type: HipaaSettingsRef, ...guard('Mutation', 'updateHipaaBaa', updateBaaOp),
    args: {
      status: t.arg({ type: BaaStatusEnum, required: true }),
      signedDate: t.arg.string({ description: 'YYYY-MM-DD' }),
      documentUrl: t.arg.string(),
    },
    resolve: (_r, a, ctx) => run(updateBaaOp, ctx, { status: a.status, signed_date: a.signedDate, document_url: a.documentUrl }),
  }),
}));
