import { describe, expect, it } from 'vitest';
import { admit, refusalError, type StartCounts } from './executions.starts.ts';

const tenant = { organizationId: 'org_1', mode: 'test' };
const now = new Date('2026-12-01T10:00:00Z');
const limits = { maxActive: 5, perMinute: 2 };

describe('admit', () => {
  it('counts each admitted start, then refuses past the per-flow cap with when a slot frees, per flow', () => {
    const counts: StartCounts = { active: new Map(), recent: new Map([['flw_a', { n: 1, oldest: new Date(now.getTime() - 45_500) }]]) };
    expect(admit(counts, tenant, 'flw_a', limits, now)).toBeNull();
    expect(admit(counts, tenant, 'flw_a', limits, now)).toEqual({ code: 'RATE_LIMIT_EXCEEDED', limit: 2, retryAfter: 15 });
    expect(admit(counts, tenant, 'flw_b', limits, now)).toBeNull();
    expect(counts.active.get('org_1:test')).toBe(2);
    expect(counts.recent.get('flw_b')).toEqual({ n: 1, oldest: now });
  });

  it('refuses past the tenant\'s active executions, whatever the flow', () => {
    const counts: StartCounts = { active: new Map([['org_1:test', 5]]), recent: new Map() };
    expect(admit(counts, tenant, 'flw_c', limits, now)).toEqual({ code: 'QUOTA_EXCEEDED', limit: 5, active: 5 });
    expect(admit(counts, { organizationId: 'org_2', mode: 'test' }, 'flw_c', limits, now)).toBeNull();
  });

  it('says why in the failed execution', () => {
    expect(refusalError({ code: 'RATE_LIMIT_EXCEEDED', limit: 2, retryAfter: 3 }, 'flw_a')).toMatchObject({ node: null, code: 'RATE_LIMIT_EXCEEDED', message: expect.stringMatching(/FLOWS_MAX_EXECUTIONS_PER_MINUTE/) });
    expect(refusalError({ code: 'QUOTA_EXCEEDED', limit: 5, active: 5 }, 'flw_a')).toMatchObject({ node: null, code: 'QUOTA_EXCEEDED' });
  });
});
