/** Compliance context: 10DLC brands and campaigns (per organization and mode). */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type { EntityType, UseCase, Vertical } from '../../providers/compliance/types.ts';

export const BRAND_STATUSES = ['pending', 'vetted', 'failed'] as const;
export type BrandStatus = (typeof BRAND_STATUSES)[number];
export const TEN_DLC_STATUSES = ['pending', 'approved', 'rejected', 'suspended'] as const;
export type TenDlcStatus = (typeof TEN_DLC_STATUSES)[number];

export const ComplianceBrand = defineEntity({
  name: 'ComplianceBrand',
  tableName: 'compliance_brands',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    companyName: p.string(),
    /** NN-NNNNNNN */
    ein: p.string(),
    country: p.string(),
    entityType: p.string().$type<EntityType>(),
    vertical: p.string().$type<Vertical>(),
    stockSymbol: p.string().nullable(),
    website: p.string().nullable(),
    contactEmail: p.string(),
    contactPhone: p.string(),
    status: p.string().$type<BrandStatus>(),
    tcrBrandId: p.string().nullable(),
    vettingScore: p.integer().nullable(),
    failureReason: p.string().nullable(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    vettedAt: p.datetime().nullable(),
  },
});
export type ComplianceBrand = InferEntity<typeof ComplianceBrand>;

export const TenDlcCampaign = defineEntity({
  name: 'TenDlcCampaign',
  tableName: 'compliance_campaigns',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    brandId: p.string(),
    useCase: p.string().$type<UseCase>(),
    description: p.string(),
    sampleMessages: p.json<string[]>(),
    messageFlow: p.string(),
    optInType: p.string(),
    optInKeywords: p.json<string[]>(),
    optOutKeywords: p.json<string[]>(),
    helpKeywords: p.json<string[]>(),
    numberIds: p.json<string[]>(),
    /** The E.164 numbers of `numberIds` when registered. */
    numbers: p.json<string[]>(),
    status: p.string().$type<TenDlcStatus>(),
    rejectionReason: p.string().nullable(),
    suspensionReason: p.string().nullable(),
    tcrCampaignId: p.string().nullable(),
    /** msg/s per number once approved: the lower of the use case's and the brand score's. */
    throughputMps: p.integer().nullable(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    reviewedAt: p.datetime().nullable(),
    suspendedAt: p.datetime().nullable(),
  },
});
export type TenDlcCampaign = InferEntity<typeof TenDlcCampaign>;
