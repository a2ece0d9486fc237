import { describe, expect, it } from 'vitest';
import { addMonth } from '../../providers/payments/types.ts';
import { PLANS, PRICE_TABLE, planByPriceId, planFeeMinor, priceOf } from './billing.plans.ts';

describe('plan catalog and price table', () => {
  it('prices units per plan in minor units and refuses unknown units', () => {
    expect(priceOf('starter', 'sms.segment', 3)).toBe(3 * PRICE_TABLE.starter['sms.segment']);
    expect(priceOf('business', 'agent.invocation', 2)).toBe(6);
    expect(() => priceOf('growth', 'fax.page', 1)).toThrow(/no price/);
    expect(() => priceOf('growth', 'sms.segment', 1.5)).toThrow(/integer/);
  });

  it('finds plans by price id; custom pricing has no fee', () => {
    expect(planByPriceId('price_growth_monthly')?.id).toBe('growth');
    expect(planByPriceId('nope')).toBeUndefined();
    expect(PLANS.map(planFeeMinor)).toEqual([4900, 19900, 49900, 0]);
  });

  it('adds calendar months clamped to the last day', () => {
    expect(addMonth(new Date('2026-01-31T10:00:00Z')).toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(addMonth(new Date('2028-01-31T00:00:00Z')).toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(addMonth(new Date('2026-12-15T08:30:00Z')).toISOString()).toBe('2027-01-15T08:30:00.000Z');
  });
});
