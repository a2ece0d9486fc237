import { describe, expect, it } from 'vitest';
import { firstLimitedEndpoint } from './yoga.ts';

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
