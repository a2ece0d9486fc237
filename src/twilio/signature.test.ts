/** X-Twilio-Signature as the official SDK computes and checks it (repeated parameters included). */
import { describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { twilioSignature } from './signature.ts';

describe('twilioSignature', () => {
  const token = 'svc_test_sk_0123456789abcdefghijABCDEFGHIJ0123456789';
  const url = 'https://hooks.example.com/status?tag=a%20b';

  it('is what twilio.validateRequest accepts, and only for the same parameters', () => {
    const params = { MessageSid: 'SM0123', MessageStatus: 'delivered', To: '+14155550100', Body: 'Grüße & more' };
    const signature = twilioSignature(token, url, params);
    expect(twilio.validateRequest(token, signature, url, params)).toBe(true);
    expect(twilio.getExpectedTwilioSignature(token, url, params)).toBe(signature);
    expect(twilio.validateRequest(token, signature, url, { ...params, MessageStatus: 'failed' })).toBe(false);
    expect(twilio.validateRequest(token, signature, 'https://hooks.example.com/other', params)).toBe(false);
    expect(twilio.validateRequest(`${token}x`, signature, url, params)).toBe(false);
  });

  it('signs a form body with a repeated parameter as the SDK reads it', () => {
    const body = new URLSearchParams([['StatusCallbackEvent', 'ringing'], ['StatusCallbackEvent', 'answered'], ['To', '+14155550100']]);
    const signature = twilioSignature(token, url, body);
    expect(twilio.validateRequest(token, signature, url, { StatusCallbackEvent: ['ringing', 'answered'], To: '+14155550100' })).toBe(true);
  });
});
