import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { checkRules, evaluate, lookup, render, renderDeep } from './flows.conditions.ts';

const ctx = { input: { amount: '42', status: 'paid', tags: ['vip', 'beta'], name: 'Ada', nested: { a: [1, 2] } }, steps: { http: { status: 200 } } };

describe('conditions', () => {
  it('evaluates operators over the context', () => {
    const t = (rule: object) => evaluate(checkRules(rule, 'r'), ctx);
    expect(t({ field: 'input.status', op: 'eq', value: 'paid' })).toBe(true);
    expect(t({ field: 'input.amount', op: 'gt', value: 40 })).toBe(true);
    expect(t({ field: 'input.amount', op: 'lte', value: 41 })).toBe(false);
    expect(t({ field: 'input.amount', op: 'eq', value: 42 })).toBe(true);
    expect(t({ field: 'input.tags', op: 'contains', value: 'vip' })).toBe(true);
    expect(t({ field: 'input.name', op: 'starts_with', value: 'ad' })).toBe(true);
    expect(t({ field: 'input.missing', op: 'exists' })).toBe(false);
    expect(t({ field: 'steps.http.status', op: 'in', value: [200, 201] })).toBe(true);
    expect(t({ any: [{ field: 'input.status', op: 'eq', value: 'refunded' }, { all: [{ field: 'input.nested.a.1', op: 'eq', value: 2 }] }] })).toBe(true);
    expect(t({ all: [{ field: 'input.status', op: 'neq', value: 'paid' }, { field: 'input.amount', op: 'gt', value: 1 }] })).toBe(false);
  });

  it('rejects malformed rules at their path', () => {
    const field = (rule: unknown) => {
      try {
        checkRules(rule, 'rules', 'n1');
      } catch (e) {
        return (e as ServiceError).details;
      }
      return undefined;
    };
    expect(field({ all: [] })).toEqual({ node: 'n1', field: 'rules.all' });
    expect(field({ all: [{ field: 'x', op: 'in', value: 'a' }] })).toEqual({ node: 'n1', field: 'rules.all.0.value' });
    expect(field({ all: [{ field: 'x', op: 'exists', value: 1 }] })).toEqual({ node: 'n1', field: 'rules.all.0.value' });
    expect(field({ any: [{ field: 'bad path!', op: 'eq', value: 1 }] })).toEqual({ node: 'n1', field: 'rules.any.0.field' });
    expect(field({ all: [{ field: 'x', op: 'eq', value: 1, extra: true }] })).toMatchObject({ node: 'n1', field: 'rules.all.0.extra' });
  });

  it('renders templates without evaluating code', () => {
    expect(render('Hi {{ input.name }}, {{input.missing}}{{constructor}}!', ctx)).toBe('Hi Ada, !');
    expect(lookup(ctx, 'input.__proto__')).toBeUndefined();
    expect(renderDeep({ total: '{{input.amount}}', list: ['{{input.tags}}'], text: 'x={{steps.http.status}}' }, ctx))
      .toEqual({ total: '42', list: [['vip', 'beta']], text: 'x=200' });
  });
});
