/**
 * The 10DLC registry (The Campaign Registry and the carriers behind it) as the compliance context
 * sees it: a brand is submitted and vetted later, a campaign is submitted and reviewed later, and
 * an approved campaign can be suspended. Outcomes arrive asynchronously: the context asks the
 * registry for a decision from a durable job once the registry's review time has passed.
 */

/** The spec's use cases and their throughput (messages per second per number). */
export const USE_CASE_THROUGHPUT = {
  customer_care: 75, marketing: 75, notifications: 75, two_factor_auth: 75, account_notifications: 75,
  delivery_notifications: 75, mixed: 15, low_volume: 1,
} as const;
export type UseCase = keyof typeof USE_CASE_THROUGHPUT;
export const USE_CASES = Object.keys(USE_CASE_THROUGHPUT) as UseCase[];

export const ENTITY_TYPES = ['private_profit', 'public_profit', 'non_profit', 'government', 'sole_proprietor'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];
export const VERTICALS = [
  'agriculture', 'communication', 'construction', 'education', 'energy', 'entertainment', 'financial', 'gambling',
  'government', 'healthcare', 'hospitality', 'human_resources', 'insurance', 'legal', 'manufacturing', 'ngo',
  'political', 'postal', 'professional', 'real_estate', 'retail', 'technology', 'transportation',
] as const;
export type Vertical = (typeof VERTICALS)[number];
export const OPT_IN_TYPES = ['web_form', 'keyword', 'verbal', 'paper_form', 'mobile_qr_code', 'other'] as const;

/** The spec's throughput by vetting score: 75-100 → 75 msg/s, 50-74 → 15, 1-49 → 4 (0: not vetted, nothing). */
export function throughputForScore(score: number): number {
  if (score >= 75) return 75;
  if (score >= 50) return 15;
  if (score >= 1) return 4;
  return 0;
}

/** The lower of the use case's and the vetting score's throughput applies. */
export function campaignThroughput(useCase: UseCase, vettingScore: number): number {
  return Math.min(USE_CASE_THROUGHPUT[useCase], throughputForScore(vettingScore));
}

export type BrandSubmission = {
  companyName: string; ein: string; country: string; entityType: EntityType; vertical: Vertical;
  stockSymbol: string | null; website: string | null; contactEmail: string;
};
export type BrandVetting = { status: 'vetted'; tcrBrandId: string; score: number } | { status: 'failed'; tcrBrandId: string; reason: string };

export type CampaignSubmission = {
  useCase: UseCase; description: string; sampleMessages: string[]; messageFlow: string;
  optOutKeywords: string[]; helpKeywords: string[];
};
export type CampaignReview = { status: 'approved'; tcrCampaignId: string } | { status: 'rejected'; tcrCampaignId: string; reason: string };

export interface ComplianceRegistry {
  /** How long the registry takes to vet a brand and to review a campaign (ms). */
  readonly vettingDelayMs: number;
  readonly reviewDelayMs: number;
  vetBrand(brandId: string, brand: BrandSubmission): BrandVetting;
  reviewCampaign(campaignId: string, campaign: CampaignSubmission): CampaignReview;
  /** Whether an approved campaign is found in violation after approval (ms later), and why. */
  suspension(campaign: CampaignSubmission): { afterMs: number; reason: string } | null;
}
