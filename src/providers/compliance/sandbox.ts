/**
 * The sandbox 10DLC registry (test-mode keys; also the only registry until a live one is wired).
 * Deterministic, so a test or a developer can predict every outcome from the input:
 *
 * Brand vetting (after `vettingDelayMs`): an EIN whose two-digit prefix is not assigned by the IRS
 * (00, 07, 08, 09, 17, 18, 19, 28, 29, 49, 69, 70, 78, 79, 89, 96, 97) fails ("EIN not found").
 * Otherwise the score is 40, +25 with a stock symbol, +15 with an https website, +10 for
 * public_profit or government entities, +10 when the contact email's domain is the website's
 * domain (capped at 100). Vetting score → throughput: see `throughputForScore`.
 *
 * Campaign review (after `reviewDelayMs`): rejected when no sample message carries opt-out
 * language (STOP, unsubscribe, opt out, or one of the campaign's opt-out keywords); when the use
 * case is two_factor_auth and no sample holds a 4-8 digit code; when the use case is marketing and
 * the message flow does not describe consent (contains none of consent, opt in/opt-in, agree,
 * subscribe); otherwise approved. An approved campaign whose description contains
 * `[sandbox:suspend]` is suspended one review delay after approval.
 */
import { createHash } from 'node:crypto';
import type { BrandSubmission, BrandVetting, CampaignReview, CampaignSubmission, ComplianceRegistry } from './types.ts';

const UNASSIGNED_EIN_PREFIXES = new Set(['00', '07', '08', '09', '17', '18', '19', '28', '29', '49', '69', '70', '78', '79', '89', '96', '97']);
const OPT_OUT_LANGUAGE = /\b(stop|unsubscribe|opt[ -]?out)\b/i;
const CONSENT_LANGUAGE = /\b(consent|opt[ -]?in|agree[sd]?|subscribe[sd]?)\b/i;
const CODE = /\b\d{4,8}\b/;

const registryId = (prefix: string, id: string) => `${prefix}${createHash('sha256').update(id).digest('hex').slice(0, 7).toUpperCase()}`;

function domainOf(url: string | null): string | null {
  if (!url) return null;
  try {
    return new URL(url).hostname.toLowerCase().replace(/^www\./, '');
  } catch {
    return null;
  }
}

export function vettingScore(brand: BrandSubmission): number {
  let score = 40;
  if (brand.stockSymbol) score += 25;
  if (brand.website?.toLowerCase().startsWith('https://')) score += 15;
  if (brand.entityType === 'public_profit' || brand.entityType === 'government') score += 10;
  const site = domainOf(brand.website);
  if (site && brand.contactEmail.toLowerCase().endsWith(`@${site}`)) score += 10;
  return Math.min(100, score);
}

export function reviewOutcome(c: CampaignSubmission): string | null {
  const optOut = c.sampleMessages.some((m) => OPT_OUT_LANGUAGE.test(m) || c.optOutKeywords.some((k) => m.toUpperCase().includes(k.toUpperCase())));
  if (!optOut) return 'Sample messages must include opt-out language (for example "Reply STOP to unsubscribe")';
  if (c.useCase === 'two_factor_auth' && !c.sampleMessages.some((m) => CODE.test(m))) {
    return 'Use case two_factor_auth does not match the sample messages: none carries a one-time code';
  }
  if (c.useCase === 'marketing' && !CONSENT_LANGUAGE.test(c.messageFlow)) {
    return 'Use case marketing needs a message flow that describes how recipients consent (opt in)';
  }
  return null;
}

export class SandboxComplianceRegistry implements ComplianceRegistry {
  readonly vettingDelayMs: number;
  readonly reviewDelayMs: number;

  constructor(opts: { vettingDelayMs: number; reviewDelayMs: number }) {
    this.vettingDelayMs = opts.vettingDelayMs;
    this.reviewDelayMs = opts.reviewDelayMs;
  }

  vetBrand(brandId: string, brand: BrandSubmission): BrandVetting {
    const tcrBrandId = registryId('B', brandId);
    if (UNASSIGNED_EIN_PREFIXES.has(brand.ein.slice(0, 2))) return { status: 'failed', tcrBrandId, reason: 'EIN not found in the IRS records' };
    return { status: 'vetted', tcrBrandId, score: vettingScore(brand) };
  }

  reviewCampaign(campaignId: string, campaign: CampaignSubmission): CampaignReview {
    const tcrCampaignId = registryId('C', campaignId);
    const reason = reviewOutcome(campaign);
    return reason ? { status: 'rejected', tcrCampaignId, reason } : { status: 'approved', tcrCampaignId };
  }

  suspension(campaign: CampaignSubmission): { afterMs: number; reason: string } | null {
    if (!campaign.description.includes('[sandbox:suspend]')) return null;
    return { afterMs: this.reviewDelayMs, reason: 'Carrier reported a compliance violation (sandbox: [sandbox:suspend])' };
  }
}
