import { describe, expect, it } from 'vitest';
import { closest, editDistance } from './suggest.ts';

describe('editDistance', () => {
  it('counts insertions, deletions, substitutions and neighbour swaps as one edit each', () => {
    expect(editDistance('sms', 'sms')).toBe(0);
    expect(editDistance('mms', 'sms')).toBe(1);
    expect(editDistance('bdoy', 'body')).toBe(1);
    expect(editDistance('to', 'too')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
  });
});

describe('closest', () => {
  it('finds the same name spelled in another case style', () => {
    expect(closest('price_id', ['priceId', 'successUrl', 'cancelUrl'])).toBe('priceId');
    expect(closest('successURL', ['priceId', 'successUrl', 'cancelUrl'])).toBe('successUrl');
    expect(closest('webhookUrl', ['to', 'body', 'webhook_url'])).toBe('webhook_url');
  });

  it('suggests a name one slip away, and nothing for a name that is no slip', () => {
    expect(closest('mms', ['sms', 'whatsapp', 'email', 'rcs', 'viber'])).toBe('sms');
    expect(closest('bdoy', ['to', 'body', 'from'])).toBe('body');
    expect(closest('media_urls', ['to', 'body', 'from', 'webhook_url', 'metadata'])).toBeUndefined();
    expect(closest('x', [])).toBeUndefined();
    // Too short to tell a slip from another name.
    expect(closest('b', ['a'])).toBeUndefined();
    expect(closest('c', ['a', 'b'])).toBeUndefined();
  });

  it('never suggests the name itself', () => {
    expect(closest('sms', ['sms'])).toBeUndefined();
  });
});
