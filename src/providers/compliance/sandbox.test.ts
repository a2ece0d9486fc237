import { describe, expect, it } from 'vitest';
import { SandboxComplianceRegistry, reviewOutcome, vettingScore } from './sandbox.ts';
import { campaignThroughput, throughputForScore } from './types.ts';

const brand = { companyName: 'Acme', ein: '12-3456789', country: 'US', entityType: 'private_profit' as const, vertical: 'retail' as const, stockSymbol: null, website: null, contactEmail: 'a@b.test' };
const campaign = { useCase: 'marketing' as const, description: 'x', sampleMessages: ['Deals! Reply STOP to opt out'], messageFlow: 'Users opt in on the web form', optOutKeywords: ['STOP'], helpKeywords: ['HELP'] };

describe('sandbox 10DLC registry', () => {
  it('scores brands by the documented rules', () => {
    expect(vettingScore(brand)).toBe(40);
    expect(vettingScore({ ...brand, website: 'https://www.b.test', contactEmail: 'ops@b.test' })).toBe(65);
    expect(vettingScore({ ...brand, entityType: 'public_profit', stockSymbol: 'ACME', website: 'https://b.test', contactEmail: 'x@b.test' })).toBe(100);
    // Plain http earns nothing for the website, but the email domain still matches.
    expect(vettingScore({ ...brand, website: 'http://b.test' })).toBe(50);
    const registry = new SandboxComplianceRegistry({ vettingDelayMs: 0, reviewDelayMs: 0 });
    expect(registry.vetBrand('brand_1', { ...brand, ein: '07-1234567' })).toMatchObject({ status: 'failed' });
    expect(registry.vetBrand('brand_1', brand)).toEqual(registry.vetBrand('brand_1', brand));
  });

  it('reviews campaigns: opt-out language, 2FA codes, marketing consent; suspends on the marker', () => {
    expect(reviewOutcome(campaign)).toBeNull();
    expect(reviewOutcome({ ...campaign, sampleMessages: ['Deals this week only'] })).toMatch(/opt-out/);
    expect(reviewOutcome({ ...campaign, sampleMessages: ['Deals, text QUIT to end'], optOutKeywords: ['QUIT'] })).toBeNull();
    expect(reviewOutcome({ ...campaign, useCase: 'two_factor_auth' })).toMatch(/two_factor_auth/);
    expect(reviewOutcome({ ...campaign, useCase: 'two_factor_auth', sampleMessages: ['Your code is 123456. Reply STOP to opt out'] })).toBeNull();
    expect(reviewOutcome({ ...campaign, messageFlow: 'We found their numbers' })).toMatch(/consent/);
    const registry = new SandboxComplianceRegistry({ vettingDelayMs: 0, reviewDelayMs: 5 });
    expect(registry.suspension(campaign)).toBeNull();
    expect(registry.suspension({ ...campaign, description: 'x [sandbox:suspend]' })?.afterMs).toBe(5);
  });

  it('applies the lower of the use-case and vetting-score throughput', () => {
    expect([100, 75, 74, 50, 49, 1, 0].map(throughputForScore)).toEqual([75, 75, 15, 15, 4, 4, 0]);
    expect(campaignThroughput('marketing', 90)).toBe(75);
    expect(campaignThroughput('mixed', 90)).toBe(15);
    expect(campaignThroughput('low_volume', 90)).toBe(1);
    expect(campaignThroughput('customer_care', 60)).toBe(15);
    expect(campaignThroughput('customer_care', 10)).toBe(4);
  });
});
