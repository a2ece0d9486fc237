/** GraphQL twins of the compliance routes (same operations, camelCase fields). */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { toWire } from '../../graphql/wire.ts';
import { ENTITY_TYPES, OPT_IN_TYPES, USE_CASES, VERTICALS } from '../../providers/compliance/types.ts';
import { BRAND_STATUSES, TEN_DLC_STATUSES, type ComplianceBrand, type TenDlcCampaign } from './compliance.entities.ts';
import { createBrandOp, createTenDlcOp, getBrandOp, getTenDlcOp, listBrandsOp, listTenDlcOp } from './compliance.operations.ts';

const BrandStatusEnum = builder.enumType('ComplianceBrandStatus', { values: BRAND_STATUSES });
const TenDlcStatusEnum = builder.enumType('TenDlcCampaignStatus', { values: TEN_DLC_STATUSES });
const UseCaseEnum = builder.enumType('TenDlcUseCase', { values: USE_CASES });
const EntityTypeEnum = builder.enumType('BrandEntityType', { values: ENTITY_TYPES });
const VerticalEnum = builder.enumType('BrandVertical', { values: VERTICALS });
const OptInTypeEnum = builder.enumType('TenDlcOptInType', { values: OPT_IN_TYPES });

const BrandRef = builder.node(builder.objectRef<ComplianceBrand>('ComplianceBrand'), {
  id: { resolve: (b) => b.id },
  loadOne: (id, ctx) => run(getBrandOp, ctx, { id }),
  fields: (t) => ({
    companyName: t.exposeString('companyName'),
    ein: t.exposeString('ein'),
    country: t.exposeString('country'),
    entityType: t.field({ type: EntityTypeEnum, resolve: (b) => b.entityType }),
    vertical: t.field({ type: VerticalEnum, resolve: (b) => b.vertical }),
    stockSymbol: t.string({ nullable: true, resolve: (b) => b.stockSymbol ?? null }),
    website: t.string({ nullable: true, resolve: (b) => b.website ?? null }),
    contactEmail: t.exposeString('contactEmail'),
    contactPhone: t.exposeString('contactPhone'),
    status: t.field({ type: BrandStatusEnum, resolve: (b) => b.status }),
    tcrBrandId: t.string({ nullable: true, resolve: (b) => b.tcrBrandId ?? null }),
    vettingScore: t.int({ nullable: true, description: '0-100, null until vetted', resolve: (b) => b.vettingScore ?? null }),
    failureReason: t.string({ nullable: true, resolve: (b) => b.failureReason ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    vettedAt: t.field({ type: 'DateTime', nullable: true, resolve: (b) => b.vettedAt ?? null }),
  }),
});

const TenDlcRef = builder.node(builder.objectRef<TenDlcCampaign>('TenDlcCampaign'), {
  id: { resolve: (c) => c.id },
  loadOne: (id, ctx) => run(getTenDlcOp, ctx, { id }),
  fields: (t) => ({
    brandId: t.exposeString('brandId'),
    useCase: t.field({ type: UseCaseEnum, resolve: (c) => c.useCase }),
    description: t.exposeString('description'),
    sampleMessages: t.exposeStringList('sampleMessages'),
    messageFlow: t.exposeString('messageFlow'),
    optInType: t.exposeString('optInType'),
    optInKeywords: t.exposeStringList('optInKeywords'),
    optOutKeywords: t.exposeStringList('optOutKeywords'),
    helpKeywords: t.exposeStringList('helpKeywords'),
    numberIds: t.exposeStringList('numberIds'),
    numbers: t.exposeStringList('numbers'),
    status: t.field({ type: TenDlcStatusEnum, resolve: (c) => c.status }),
    rejectionReason: t.string({ nullable: true, resolve: (c) => c.rejectionReason ?? null }),
    suspensionReason: t.string({ nullable: true, resolve: (c) => c.suspensionReason ?? null }),
    tcrCampaignId: t.string({ nullable: true, resolve: (c) => c.tcrCampaignId ?? null }),
    throughputMps: t.int({ nullable: true, description: 'msg/s per number once approved', resolve: (c) => c.throughputMps ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    reviewedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.reviewedAt ?? null }),
    suspendedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.suspendedAt ?? null }),
  }),
});

const CreateBrandInput = builder.inputType('CreateComplianceBrandInput', {
  fields: (t) => ({
    companyName: t.string({ required: true }),
    ein: t.string({ required: true, description: 'NN-NNNNNNN' }),
    country: t.string({ required: true, description: 'ISO 3166-1 alpha-2' }),
    entityType: t.field({ type: EntityTypeEnum, required: true }),
    vertical: t.field({ type: VerticalEnum, required: true }),
    stockSymbol: t.string({ required: false }),
    website: t.string({ required: false }),
    contactEmail: t.string({ required: true }),
    contactPhone: t.string({ required: true }),
  }),
});

const CreateTenDlcInput = builder.inputType('CreateTenDlcCampaignInput', {
  fields: (t) => ({
    brandId: t.string({ required: true }),
    useCase: t.field({ type: UseCaseEnum, required: true }),
    description: t.string({ required: true }),
    sampleMessages: t.stringList({ required: true }),
    messageFlow: t.string({ required: true }),
    optInType: t.field({ type: OptInTypeEnum, required: true }),
    optInKeywords: t.stringList({ required: false }),
    optOutKeywords: t.stringList({ required: false }),
    helpKeywords: t.stringList({ required: false }),
    numberIds: t.stringList({ required: true }),
  }),
});

builder.queryFields((t) => ({
  complianceBrands: t.connection({
    type: BrandRef, ...guard('Query', 'complianceBrands', listBrandsOp),
    args: { status: t.arg({ type: BrandStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listBrandsOp, ctx, { ...pageRequest(args), status: args.status })),
  }),
  complianceBrand: t.field({
    type: BrandRef, ...guard('Query', 'complianceBrand', getBrandOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getBrandOp, ctx, { id: String(args.id) }),
  }),
  tenDlcCampaigns: t.connection({
    type: TenDlcRef, ...guard('Query', 'tenDlcCampaigns', listTenDlcOp),
    args: { status: t.arg({ type: TenDlcStatusEnum, required: false }), brandId: t.arg.string({ required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listTenDlcOp, ctx, { ...pageRequest(args), status: args.status, brand_id: args.brandId })),
  }),
  tenDlcCampaign: t.field({
    type: TenDlcRef, ...guard('Query', 'tenDlcCampaign', getTenDlcOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getTenDlcOp, ctx, { id: String(args.id) }),
  }),
}));

builder.mutationFields((t) => ({
  createComplianceBrand: t.field({
    type: BrandRef, ...guard('Mutation', 'createComplianceBrand', createBrandOp),
    args: { input: t.arg({ type: CreateBrandInput, required: true }) },
    resolve: (_r, args, ctx) => run(createBrandOp, ctx, toWire(args.input)),
  }),
  createTenDlcCampaign: t.field({
    type: TenDlcRef, ...guard('Mutation', 'createTenDlcCampaign', createTenDlcOp),
    args: { input: t.arg({ type: CreateTenDlcInput, required: true }) },
    resolve: (_r, args, ctx) => run(createTenDlcOp, ctx, toWire(args.input)),
  }),
}));
