import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ServiceError } from './errors.ts';
import { cents, idInput } from './inputs.ts';
import { parseInput } from './operations.ts';
import { unknownFields } from './validation.ts';

/** The error parseInput throws, as data. */
function refused(schema: z.ZodType<unknown>, raw: unknown) {
  try {
    parseInput(schema, raw);
  } catch (e) {
    if (e instanceof ServiceError) return { code: e.code, message: e.message, details: e.details };
    throw e;
  }
  throw new Error('accepted');
}

const paths = (schema: z.ZodType<unknown>, raw: unknown) => unknownFields(schema, raw).map((u) => u.path.join('.'));

describe('unknownFields', () => {
  it('finds keys no object declares, at any depth: lists, records, wrappers, pipes, lazies', () => {
    const item = z.object({ x: z.number() });
    const tree: z.ZodType<unknown> = z.lazy(() => z.object({ name: z.string(), children: z.array(tree).optional() }));
    const schema = z.object({
      list: z.array(item).nullish(),
      map: z.record(z.string(), item).optional(),
      piped: z.object({ a: z.string() }).transform((v) => v.a).optional(),
      tree: tree.optional(),
    });
    expect(paths(schema, {
      list: [{ x: 1, y: 2 }, { x: 2 }], map: { k: { x: 1, z: 3 } }, piped: { a: 'a', b: 'b' },
      tree: { name: 'r', children: [{ name: 'c', kids: [] }] }, extra: true,
    })).toEqual(['list.0.y', 'map.k.z', 'piped.b', 'tree.children.0.kids', 'extra']);
    expect(paths(schema, { list: null, map: undefined })).toEqual([]);
  });

  it('takes both sides of an intersection as one object', () => {
    const schema = z.intersection(idInput, z.object({ tags: z.array(z.string()) }));
    expect(paths(schema, { id: 'con_1', tags: ['a'] })).toEqual([]);
    expect(paths(schema, { id: 'con_1', tags: ['a'], tagz: 1 })).toEqual(['tagz']);
  });

  it('judges a union by the option the value fits', () => {
    const schema = z.union([z.object({ a: z.string() }), z.object({ a: z.string(), b: z.string() })]);
    expect(paths(schema, { a: 'x', b: 'y' })).toEqual([]);
    expect(paths(schema, { a: 'x', c: 'y' })).toEqual(['c']);
    const tagged = z.discriminatedUnion('type', [z.object({ type: z.literal('a'), a: z.string() }), z.object({ type: z.literal('b'), b: z.string() })]);
    expect(paths(tagged, { type: 'b', b: 'x' })).toEqual([]);
    expect(paths(tagged, { type: 'a', a: 'x', b: 'y' })).toEqual(['b']);
  });

  it('leaves open objects alone, and strict ones to zod (reported once)', () => {
    expect(paths(z.object({ id: z.string() }).catchall(z.unknown()), { id: 'x', any: 1 })).toEqual([]);
    expect(paths(z.looseObject({ id: z.string() }), { id: 'x', any: 1 })).toEqual([]);
    expect(paths(z.strictObject({ id: z.string() }), { id: 'x', any: 1 })).toEqual([]);
    expect(refused(z.strictObject({ name: z.string() }), { name: 'x', nmae: 'y' })).toMatchObject({
      message: 'Received unknown parameter: nmae (did you mean name?)', details: { errors: [{ field: 'nmae', did_you_mean: 'name' }] },
    });
  });
});

describe('parseInput problems', () => {
  it('reports every problem once, the first one deciding the code', () => {
    const schema = z.object({ name: z.string().min(1), count: z.number().int().max(10), kind: z.enum(['a', 'b']) });
    const e = refused(schema, { name: '', count: 11.5, oops: 1 });
    expect(e.code).toBe('VALIDATION_ERROR');
    expect((e.details.errors as { field: string }[]).map((p) => p.field)).toEqual(['name', 'count', 'kind', 'oops']);
    expect(e.message).toBe('4 problems: name must not be empty; count must be a whole number; it is 11.5; for example 10; '
      + 'kind is required (one of: "a", "b"); Received unknown parameter: oops');
  });

  it('says the unit of a money field', () => {
    const schema = z.object({ amount: cents(z.number().int().min(100)) });
    expect(refused(schema, {})).toMatchObject({ code: 'MISSING_REQUIRED_FIELD', message: 'amount is required: a whole number of cents, for example 1000' });
    expect(refused(schema, { amount: 5 })).toMatchObject({ message: 'amount must be at least 100 cents; it is 5', details: { expected: '>= 100 cents' } });
  });

  it('keeps a schema\'s own words, naming the field once', () => {
    const schema = z.object({ day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date such as 2026-01-31'), other: z.string().refine(() => false, 'other is never right') });
    expect(refused(schema, { day: 'today', other: 'x' }).message).toBe('2 problems: day: must be a date such as 2026-01-31; other is never right');
  });

  it('names the types it expected and got, and a discriminator\'s choices', () => {
    const tagged = z.object({ step: z.discriminatedUnion('type', [z.object({ type: z.literal('wait') }), z.object({ type: z.literal('send') })]) });
    expect(refused(tagged, { step: { type: 'sned' } })).toMatchObject({ message: 'step.type must be one of: "wait", "send" (did you mean "send"?)', details: { did_you_mean: 'send' } });
    expect(refused(tagged, { step: {} })).toMatchObject({ code: 'MISSING_REQUIRED_FIELD', details: { field: 'step.type' } });
    const either = z.object({ to: z.union([z.string(), z.array(z.string())]) });
    expect(refused(either, { to: 5 }).message).toBe('to must be text or a list, not a number');
    expect(refused(z.object({ flag: z.boolean() }), { flag: 'yes' }).message).toBe('flag must be true or false, not text; for example true');
  });
});
