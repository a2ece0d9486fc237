import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { compileRules, MAX_RULE_DEPTH } from './segments.rules.ts';

const now = new Date('2026-03-01T00:00:00Z');
const fieldOf = (rules: unknown) => {
  try {
    compileRules(rules, now);
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    expect((e as ServiceError).code).toBe('VALIDATION_ERROR');
    return (e as ServiceError).details.field;
  }
  throw new Error('expected a validation error');
};

describe('compileRules', () => {
  it('compiles groups into one parameterized predicate', () => {
    const { sql, params } = compileRules({ all: [
      { field: 'lifecycle_stage', op: 'in', value: ['lead', 'customer'] },
      { any: [{ field: 'tags', op: 'contains', value: 'vip' }, { field: 'country', op: 'eq', value: 'us' }] },
    ] }, now);
    expect(sql).toBe('(c.lifecycle_stage = any(?::text[]) and (c.tags @> ?::jsonb or c.country = ?))');
    expect(params).toEqual([['lead', 'customer'], '["vip"]', 'US']);
  });

  it('never puts values in the SQL text', () => {
    const { sql, params } = compileRules({ all: [{ field: 'first_name', op: 'contains', value: "x'; drop table contacts; --" }, { field: 'metadata.a-b.c_d', op: 'eq', value: 'v' }] }, now);
    expect(sql).not.toContain('drop');
    expect(params).toEqual(["%x'; drop table contacts; --%", 'a-b', 'c_d', '"v"']);
  });

  it('anchors relative dates on the given time', () => {
    const { params } = compileRules({ all: [{ field: 'created_at', op: 'within_days', value: 2 }, { field: 'activity', op: 'within_days', value: 1, channel: 'sms' }] }, now);
    expect(params).toEqual([new Date('2026-02-27T00:00:00Z'), new Date('2026-02-28T00:00:00Z'), 'sms']);
  });

  it('escapes LIKE wildcards', () => {
    expect(compileRules({ all: [{ field: 'email', op: 'starts_with', value: 'A_%' }] }, now).params).toEqual(['a\\_\\%%']);
  });

  it('rejects unknown fields, operators, values and shapes with the path to the offender', () => {
    expect(fieldOf({ all: [{ field: 'nope', op: 'eq', value: 1 }] })).toBe('rules.all.0.field');
    expect(fieldOf({ all: [{ field: 'tags', op: 'eq', value: 'x' }] })).toBe('rules.all.0.op');
    expect(fieldOf({ all: [{ field: 'metadata.$bad', op: 'eq', value: 1 }] })).toBe('rules.all.0.field');
    expect(fieldOf({ all: [{ field: 'metadata.n', op: 'gt', value: '1' }] })).toBe('rules.all.0.value');
    expect(fieldOf({ all: [{ field: 'created_at', op: 'within_days', value: 0 }] })).toBe('rules.all.0.value');
    expect(fieldOf({ all: [{ field: 'activity', op: 'within_days', value: 1, channel: 'fax' }] })).toBe('rules.all.0.channel');
    expect(fieldOf({ all: [{ field: 'country', op: 'eq', value: 'US', channel: 'sms' }] })).toBe('rules.all.0.channel');
    expect(fieldOf({ all: [{ field: 'country', op: 'exists', value: 'US' }] })).toBe('rules.all.0.value');
    expect(fieldOf({ all: [{ field: 'country', op: 'eq', value: 'US', extra: 1 }] })).toBe('rules.all.0.extra');
    expect(fieldOf({ all: [], any: [] })).toBe('rules.all');
    expect(fieldOf([])).toBe('rules');
    expect(fieldOf({ field: 'country', op: 'eq', value: 'US' })).toBe('rules');
    let deep: unknown = { all: [] };
    for (let i = 0; i < MAX_RULE_DEPTH; i++) deep = { all: [deep] };
    expect(fieldOf(deep)).toMatch(/^rules(\.all\.0)+$/);
  });
});
