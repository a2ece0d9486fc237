import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { checkWebhookSignature, parseWebhookSignature, webhookSignatureOf } from './flows.webhook.ts';

const secret = 'whsec_0123456789abcdef';
const body = '{"n":1}';
const at = new Date('2026-12-01T10:00:00Z');
const t = at.getTime() / 1000;
const mac = (id: string, ts: number, raw = body, key = secret) => createHmac('sha256', key).update(`${id}.${ts}.${raw}`).digest('hex');

function refusal(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    expect((e as ServiceError).code).toBe('UNAUTHORIZED');
    return e as ServiceError;
  }
  throw new Error('expected UNAUTHORIZED');
}

describe('parseWebhookSignature', () => {
  it('reads t, flow, id and every v1, in any order, ignoring unknown keys and spaces', () => {
    expect(parseWebhookSignature(`t=${t},flow=flw_01abc,id=dlv_1,v1=${mac('dlv_1', t)}`)).toEqual({ timestamp: t, flowId: 'flw_01abc', deliveryId: 'dlv_1', signatures: [mac('dlv_1', t)] });
    const parsed = parseWebhookSignature(`v1=${'a'.repeat(64)}, id=msg_2QJ:x/y , v0=old, flow=flw_01abc, t=${t}, v1=${'b'.repeat(64)}`);
    expect(parsed).toMatchObject({ deliveryId: 'msg_2QJ:x/y', signatures: ['a'.repeat(64), 'b'.repeat(64)] });
  });

  it('refuses a missing or malformed header, naming the format', () => {
    const v1 = mac('dlv_1', t);
    for (const header of [
      undefined, '', `flw_01abc.${v1}`, `t=${t},flow=flw_01abc,v1=${v1}`, `flow=flw_01abc,id=dlv_1,v1=${v1}`, `t=${t},id=dlv_1,v1=${v1}`,
      `t=${t},flow=flw_01abc,id=dlv_1`, `t=soon,flow=flw_01abc,id=dlv_1,v1=${v1}`, `t=${t},flow=flw_01abc,id=dlv_1,v1=${v1.toUpperCase()}`,
      `t=${t},t=${t},flow=flw_01abc,id=dlv_1,v1=${v1}`, `t=${t},flow=flw_01abc,id=,v1=${v1}`, `t=${t},flow=flw_01abc,id=a b,v1=${v1}`, `t=${t},flow=../x,id=dlv_1,v1=${v1}`,
    ]) {
      expect(refusal(() => parseWebhookSignature(header)).message, String(header)).toMatch(/t=<unix seconds>,flow=<flow id>,id=<delivery id>,v1=/);
    }
  });
});

describe('checkWebhookSignature', () => {
  const sig = (id: string, ts: number, v1 = mac(id, ts)) => parseWebhookSignature(`t=${ts},flow=flw_01abc,id=${id},v1=${v1}`);

  it('accepts the HMAC of "<id>.<t>.<body>" with the secret, one v1 of several matching, within the tolerance either way', () => {
    expect(webhookSignatureOf(secret, 'dlv_1', t, body)).toBe(mac('dlv_1', t));
    expect(() => checkWebhookSignature(sig('dlv_1', t), secret, body, at, 300)).not.toThrow();
    expect(() => checkWebhookSignature(sig('dlv_1', t - 300), secret, body, at, 300)).not.toThrow();
    expect(() => checkWebhookSignature(sig('dlv_1', t + 300), secret, body, at, 300)).not.toThrow();
    const two = parseWebhookSignature(`t=${t},flow=flw_01abc,id=dlv_1,v1=${mac('dlv_1', t, body, 'whsec_old')},v1=${mac('dlv_1', t)}`);
    expect(() => checkWebhookSignature(two, secret, body, at, 300)).not.toThrow();
  });

  it('refuses another body, id, time or key, and a time outside the tolerance', () => {
    refusal(() => checkWebhookSignature(sig('dlv_1', t), secret, '{"n":2}', at, 300));
    refusal(() => checkWebhookSignature(sig('dlv_2', t, mac('dlv_1', t)), secret, body, at, 300));
    refusal(() => checkWebhookSignature(sig('dlv_1', t + 1, mac('dlv_1', t)), secret, body, at, 300));
    refusal(() => checkWebhookSignature(sig('dlv_1', t), 'whsec_other', body, at, 300));
    expect(refusal(() => checkWebhookSignature(sig('dlv_1', t - 301), secret, body, at, 300)).details).toMatchObject({ timestamp: t - 301, tolerance_seconds: 300 });
    expect(refusal(() => checkWebhookSignature(sig('dlv_1', t + 301), secret, body, at, 300)).message).toMatch(/ahead/);
  });
});
