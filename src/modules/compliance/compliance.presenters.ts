/** REST shapes (snake_case) of 10DLC brands and campaigns. */
import type { ComplianceBrand, TenDlcCampaign } from './compliance.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentBrand(b: ComplianceBrand) {
  return {
    id: b.id, company_name: b.companyName, ein: b.ein, country: b.country, entity_type: b.entityType, vertical: b.vertical,
    stock_symbol: b.stockSymbol ?? null, website: b.website ?? null, contact_email: b.contactEmail, contact_phone: b.contactPhone,
    status: b.status, tcr_brand_id: b.tcrBrandId ?? null, vetting_score: b.vettingScore ?? null, failure_reason: b.failureReason ?? null,
    created_at: iso(b.createdAt), updated_at: iso(b.updatedAt), vetted_at: iso(b.vettedAt),
  };
}

export function presentTenDlc(c: TenDlcCampaign) {
  return {
    id: c.id, brand_id: c.brandId, use_case: c.useCase, description: c.description, sample_messages: c.sampleMessages,
    message_flow: c.messageFlow, opt_in_type: c.optInType, opt_in_keywords: c.optInKeywords, opt_out_keywords: c.optOutKeywords,
    help_keywords: c.helpKeywords, number_ids: c.numberIds, numbers: c.numbers, status: c.status,
    rejection_reason: c.rejectionReason ?? null, suspension_reason: c.suspensionReason ?? null, tcr_campaign_id: c.tcrCampaignId ?? null,
    throughput_mps: c.throughputMps ?? null, created_at: iso(c.createdAt), updated_at: iso(c.updatedAt),
    reviewed_at: iso(c.reviewedAt), suspended_at: iso(c.suspendedAt),
  };
}
