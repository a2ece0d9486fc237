import { describe, expect, it } from 'vitest';
import { addBusinessDays, addMonths } from './numbers.calendar.ts';

describe('addMonths', () => {
  it('keeps the anchor day, or the last day of a shorter month', () => {
    const anchor = new Date('2025-01-31T10:00:00Z');
    expect([1, 2, 3, 13].map((m) => addMonths(anchor, m).toISOString())).toEqual([
      '2025-02-28T10:00:00.000Z', '2025-03-31T10:00:00.000Z', '2025-04-30T10:00:00.000Z', '2026-02-28T10:00:00.000Z',
    ]);
    expect(addMonths(new Date('2024-01-31T00:00:00Z'), 1).toISOString()).toBe('2024-02-29T00:00:00.000Z');
    expect(addMonths(new Date('2025-11-15T08:30:00Z'), 2).toISOString()).toBe('2026-01-15T08:30:00.000Z');
  });
});

describe('addBusinessDays', () => {
  it('skips Saturdays and Sundays', () => {
    // Friday + 1 business day = Monday; Monday + 10 = the Monday two weeks later.
    expect(addBusinessDays(new Date('2026-11-20T09:00:00Z'), 1).toISOString()).toBe('2026-11-23T09:00:00.000Z');
    expect(addBusinessDays(new Date('2026-11-23T09:00:00Z'), 10).toISOString()).toBe('2026-12-07T09:00:00.000Z');
    // From a Saturday, the first business day is Monday.
    expect(addBusinessDays(new Date('2026-11-21T09:00:00Z'), 1).toISOString()).toBe('2026-11-23T09:00:00.000Z');
    expect(addBusinessDays(new Date('2026-11-21T09:00:00Z'), 0).toISOString()).toBe('2026-11-21T09:00:00.000Z');
  });
});
