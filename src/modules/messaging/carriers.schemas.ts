/**
 * Inputs of the connector and route operations (REST wire shape; GraphQL converts to it). Limits
 * follow SMPP 3.4 where it has them (system_id 15 and system_type 12 characters); the password is
 * write-only. Destination prefixes are `+` and up to 15 digits (empty: every destination); a route's
 * sender is an E.164 number.
 */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { SMPP_BIND_MODES } from '../../providers/messaging/smpp/connector.ts';
import { CONCATENATIONS } from '../../providers/messaging/smpp/encoding.ts';
import { CARRIER_CHANNELS, CONNECTOR_KINDS } from './carriers.entities.ts';

const smppFields = {
  host: z.string().trim().min(1).max(253),
  port: z.number().int().min(1).max(65535),
  tls: z.boolean().nullish(),
  system_id: z.string().min(1).max(15),
  password: z.string().min(1).max(64),
  system_type: z.string().max(12).nullish(),
  bind_mode: z.enum(SMPP_BIND_MODES).nullish(),
  binds: z.number().int().min(1).max(16).nullish(),
  window: z.number().int().min(1).max(1000).nullish(),
  throughput: z.number().positive().max(10_000).nullish(),
  concatenation: z.enum(CONCATENATIONS).nullish(),
  enquire_link_seconds: z.number().min(1).max(600).nullish(),
  request_receipts: z.boolean().nullish(),
};

export const SMPP_DEFAULTS = {
  tls: false, system_type: '', bind_mode: 'transceiver', binds: 1, window: 10, throughput: 100, concatenation: 'udh', enquire_link_seconds: 30, request_receipts: true,
} as const;

export const createConnectorInput = z.object({
  name: z.string().trim().min(1).max(100),
  kind: z.enum(CONNECTOR_KINDS),
  channel: z.enum(CARRIER_CHANNELS).nullish(),
  shared: z.boolean().nullish(),
  enabled: z.boolean().nullish(),
  smpp: z.object(smppFields),
});
export type CreateConnectorInput = z.infer<typeof createConnectorInput>;

export const updateConnectorInput = z.object({
  id: z.string().min(1).max(100),
  name: z.string().trim().min(1).max(100).nullish(),
  enabled: z.boolean().nullish(),
  /** Only the settings given change; a password given replaces the stored one. */
  smpp: z.object(smppFields).partial().nullish(),
});
export type UpdateConnectorInput = z.infer<typeof updateConnectorInput>;

const prefix = z.string().trim().max(16).refine((p) => p === '' || /^\+\d{1,15}$/.test(p), { message: 'prefix is + and 1 to 15 digits, or empty for every destination' });
const sender = z.string().trim().min(1).transform((value, ctx) => {
  const phone = normalizePhone(value);
  if (!phone) {
    ctx.addIssue({ code: 'custom', message: `${value} is not an E.164 number`, params: { code: 'INVALID_PHONE_NUMBER' } });
    return z.NEVER;
  }
  return phone;
});

export const createRouteInput = z.object({
  connector_id: z.string().min(1).max(100),
  channel: z.enum(CARRIER_CHANNELS).nullish(),
  prefix: prefix.nullish(),
  sender: sender.nullish(),
  priority: z.number().int().min(0).max(1000).nullish(),
  weight: z.number().int().min(1).max(10_000).nullish(),
  shared: z.boolean().nullish(),
});
export type CreateRouteInput = z.infer<typeof createRouteInput>;

export const updateRouteInput = z.object({
  id: z.string().min(1).max(100),
  connector_id: z.string().min(1).max(100).nullish(),
  prefix: prefix.nullish(),
  /** null clears the sender (every sender matches); absent leaves it. */
  sender: sender.nullable().optional(),
  priority: z.number().int().min(0).max(1000).nullish(),
  weight: z.number().int().min(1).max(10_000).nullish(),
});
export type UpdateRouteInput = z.infer<typeof updateRouteInput>;

export const listCarriersInput = pageInput;
