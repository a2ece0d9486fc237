import { describe, expect, it } from 'vitest';
import { parse } from 'graphql';
import { firstLimitedEndpoint, limitedFieldEndpoints } from './yoga.ts';
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
