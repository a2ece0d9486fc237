import { describe, expect, it } from 'vitest';
import { envelop, useEngine, useSchema } from '@envelop/core';
import { experimentalExecuteIncrementally, parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema, type ValidationRule } from 'graphql';
import { documentCaches, introspectionAnswers } from './yoga.ts';
import { firstLimitedEndpoint, limitedFieldEndpoints } from './rateLimits.ts';
import { schema } from './schema.ts';

describe('firstLimitedEndpoint', () => {
  it('is the REST twin endpoint of the first rate-limited root field of the operation that runs', () => {
    expect(firstLimitedEndpoint('mutation { sendSms(input: { to: "+14155550100", body: "x" }) { id } }', undefined)).toBe('POST /v1/messages/sms');
    expect(firstLimitedEndpoint('{ teamMembers(first: 1) { edges { cursor } } }', undefined)).toBe('GET /v1/settings/team');
    // Aliases do not matter; the first limited field in document order wins.
    expect(firstLimitedEndpoint('{ t: teamMembers(first: 1) { edges { cursor } } s: messages(first: 1) { edges { cursor } } }', undefined)).toBe('GET /v1/settings/team');
  });

  it('follows operationName among several operations', () => {
    const doc = 'query A { teamMembers(first: 1) { edges { cursor } } } mutation B { sendSms(input: { to: "+14155550100", body: "x" }) { id } }';
    expect(firstLimitedEndpoint(doc, 'B')).toBe('POST /v1/messages/sms');
    expect(firstLimitedEndpoint(doc, 'A')).toBe('GET /v1/settings/team');
    expect(firstLimitedEndpoint(doc, undefined)).toBeNull(); // ambiguous: Yoga reports it
    expect(firstLimitedEndpoint(doc, 'Missing')).toBeNull();
  });

  it('is null for root fragments, fields without a window and documents that do not parse', () => {
    expect(firstLimitedEndpoint('{ ... on Query { teamMembers(first: 1) { edges { cursor } } } }', undefined)).toBeNull();
    expect(firstLimitedEndpoint('{ __typename }', undefined)).toBeNull();
    expect(firstLimitedEndpoint('{ teamMembers(', undefined)).toBeNull();
  });
});

describe('limitedFieldEndpoints', () => {
  const endpoints = (query: string) => limitedFieldEndpoints(parse(query), schema);

  it('lists every rate-limited field node of the document, as the rate-limit plugin visits them', () => {
    expect(endpoints('mutation { sendSms(input: { to: "+14155550100", body: "x" }) { id status } }')).toEqual(['POST /v1/messages/sms']);
    expect(endpoints('{ a: teamMembers(first: 1) { edges { cursor } } b: teamMembers(first: 1) { edges { cursor } } }')).toEqual(['GET /v1/settings/team', 'GET /v1/settings/team']);
    // Fragments and every operation count, whichever one runs.
    expect(endpoints('query A { ...F } fragment F on Query { teamMembers(first: 1) { edges { cursor } } }')).toEqual(['GET /v1/settings/team']);
    expect(endpoints('query A { teamMembers(first: 1) { edges { cursor } } } mutation B { sendSms(input: { to: "+14155550100", body: "x" }) { id } }'))
      .toEqual(['GET /v1/settings/team', 'POST /v1/messages/sms']);
    expect(endpoints('{ __typename }')).toEqual([]);
  });

  it('is computed once per document object', () => {
    const doc = parse('{ teamMembers(first: 1) { edges { cursor } } }');
    expect(limitedFieldEndpoints(doc, schema)).toBe(limitedFieldEndpoints(doc, schema));
  });
});

describe('documentCaches', () => {
  const setup = (max?: number) => {
    const calls = { parse: 0, validate: 0 };
    const getEnveloped = envelop({
      plugins: [
        useEngine({
          parse: (source: string) => { calls.parse++; return parse(source); },
          validate: ((s: GraphQLSchema, d: DocumentNode, rules?: readonly ValidationRule[]) => { calls.validate++; return validate(s, d, rules); }) as typeof validate,
          specifiedRules,
          execute: () => ({}), subscribe: () => ({}),
        }),
        useSchema(schema),
        documentCaches(max),
      ],
    });
    return { calls, getEnveloped };
  };

  it('parses each query text once and validates each document once with the standard rules', () => {
    const { calls, getEnveloped } = setup();
    const a = getEnveloped({}).parse('{ viewer { role } }');
    const b = getEnveloped({}).parse('{ viewer { role } }');
    expect(b).toBe(a);
    expect(calls.parse).toBe(1);
    expect(getEnveloped({}).validate(schema, a)).toEqual([]);
    const bad = getEnveloped({}).parse('{ viewer { nope } }');
    const errors = getEnveloped({}).validate(schema, bad);
    expect(errors).toHaveLength(1);
    expect(getEnveloped({}).validate(schema, bad)).toBe(errors);
    expect(getEnveloped({}).validate(schema, a)).toEqual([]);
    expect(calls.validate).toBe(2);
  });

  it('validates afresh under other rules and drops the oldest document past its bound', () => {
    const { calls, getEnveloped } = setup(2);
    const doc = getEnveloped({}).parse('{ viewer { role } }');
    const onlyOne = [specifiedRules[0]!];
    getEnveloped({}).validate(schema, doc, onlyOne);
    getEnveloped({}).validate(schema, doc, onlyOne);
    expect(calls.validate).toBe(2);
    getEnveloped({}).parse('{ a: viewer { role } }');
    getEnveloped({}).parse('{ b: viewer { role } }');
    getEnveloped({}).parse('{ viewer { role } }'); // evicted by the two above: parsed again
    expect(calls.parse).toBe(4);
  });
});

describe('introspectionAnswers', () => {
  const setup = () => {
    let executions = 0;
    const getEnveloped = envelop({
      plugins: [
        useEngine({
          parse, validate, specifiedRules, subscribe: () => ({}),
          // graphql 17's plain execute refuses a schema declaring @defer and @stream (ours does).
          execute: ((args: Parameters<typeof experimentalExecuteIncrementally>[0]) => { executions++; return experimentalExecuteIncrementally(args); }) as never,
        }),
        useSchema(schema),
        introspectionAnswers(2),
      ],
    });
    const run = async (document: DocumentNode, variableValues: Record<string, unknown> = {}, operationName?: string) =>
      (await getEnveloped({}).execute({ schema, document, variableValues, operationName, contextValue: {} })) as { data?: Record<string, unknown>; errors?: unknown[] };
    return { run, executions: () => executions };
  };

  it('runs an introspection-only operation once per document, operation name and variables; other operations every time', async () => {
    const { run, executions } = setup();
    const doc = parse('query T($n: String!) { __typename __type(name: $n) { name kind } }');
    const first = await run(doc, { n: 'Query' });
    expect(first.data).toEqual({ __typename: 'Query', __type: { name: 'Query', kind: 'OBJECT' } });
    expect(await run(doc, { n: 'Query' })).toBe(first);
    expect(executions()).toBe(1);
    expect((await run(doc, { n: 'Mutation' })).data).toMatchObject({ __type: { name: 'Mutation' } });
    expect(executions()).toBe(2);
    // A document that asks for data runs every time.
    const data = parse('{ __typename viewer { role } }');
    await run(data);
    await run(data);
    expect(executions()).toBe(4);
  });

  it('keeps at most the given number of answers per document (the oldest dropped first)', async () => {
    const { run, executions } = setup();
    const doc = parse('query T($n: String!) { __type(name: $n) { name } }');
    for (const n of ['Query', 'Mutation', 'Subscription', 'Query']) await run(doc, { n });
    expect(executions()).toBe(4);
    await run(doc, { n: 'Subscription' });
    expect(executions()).toBe(4);
  });
});
