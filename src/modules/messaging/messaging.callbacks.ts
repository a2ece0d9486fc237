/**
 * Provider callbacks: `POST /v1/providers/{provider}/callbacks`, authenticated by the provider's
 * signature (`X-Provider-Signature: sha256=<hex HMAC-SHA256 of the raw body>` keyed with the
 * provider's secret), not by an API key. Two kinds of payload:
 *   { "type": "status", "provider_message_id": "…", "status": "delivered", "error_code": null }
 *   { "type": "inbound", "channel": "sms", "from": "+1…", "to": "<our sender>", "body": "…", "provider_message_id": "…" }
 * Status reports go through the same transition rules as the sandbox's; inbound messages belong to
 * the organization that owns the receiving sender address.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { badRequest, ServiceError } from '../../platform/errors.ts';
import { parseInput } from '../../platform/operations.ts';
import type { Clock } from '../../platform/clock.ts';
import { CHANNELS, REPORTED_STATUSES } from '../../providers/messaging/types.ts';
import type { MessageDelivery } from './messaging.delivery.ts';
import type { MessageInbound } from './messaging.inbound.ts';

const callbackInput = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('status'),
    provider_message_id: z.string().min(1),
    status: z.enum(REPORTED_STATUSES),
    error_code: z.string().nullish(),
    timestamp: z.iso.datetime({ offset: true }).nullish(),
  }),
  z.object({
    type: z.literal('inbound'),
    channel: z.enum(CHANNELS),
    from: z.string().min(1),
    to: z.string().min(1),
    body: z.string().max(10_000).nullish(),
    provider_message_id: z.string().nullish(),
  }),
]);

export function verifyProviderSignature(secret: string, rawBody: string, header: string | undefined): boolean {
  const m = /^sha256=([0-9a-f]{64})$/i.exec(header ?? '');
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(m[1]!, 'hex'));
}

export async function handleProviderCallback(
  deps: { delivery: MessageDelivery; inbound: MessageInbound; clock: Clock; providerSecret: (name: string) => string },
  provider: string, rawBody: string, signature: string | undefined,
): Promise<Record<string, unknown>> {
  if (!/^[a-z0-9_-]{1,40}$/.test(provider)) throw new ServiceError('NOT_FOUND', `Unknown provider ${provider}`);
  if (!verifyProviderSignature(deps.providerSecret(provider), rawBody, signature)) {
    throw new ServiceError('UNAUTHORIZED', 'Invalid or missing X-Provider-Signature');
  }
  let json: unknown;
  try {
    json = JSON.parse(rawBody);
  } catch {
    throw badRequest('Callback body is not valid JSON');
  }
  const input = parseInput(callbackInput, json);
  if (input.type === 'status') {
    const applied = await deps.delivery.applyStatusReport({
      provider, providerMessageId: input.provider_message_id, status: input.status, errorCode: input.error_code ?? undefined,
      at: input.timestamp ? new Date(input.timestamp) : deps.clock.now(),
    });
    return { accepted: true, applied };
  }
  const message = await deps.inbound.receiveProviderInbound(provider, {
    channel: input.channel, from: input.from, to: input.to, body: input.body ?? null, providerMessageId: input.provider_message_id ?? undefined,
  });
  if (!message) throw new ServiceError('NOT_FOUND', `No account owns the ${input.channel} address ${input.to}`, { field: 'to' });
  return { accepted: true, message_id: message.id };
}
