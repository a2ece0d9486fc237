/** Input schemas of the settings context, shared by GraphQL and REST. */
import { z } from 'zod';
import { ROLES } from '../../platform/auth/roles.ts';
import { parseCidr } from '../../platform/auth/ip.ts';
import { MODES } from '../../platform/db/tenant.ts';

export const AUDIT_EXPORT_FORMATS = ['csv', 'json'] as const;
export type AuditExportFormat = (typeof AUDIT_EXPORT_FORMATS)[number];

export const createApiKeyInput = z.object({
  name: z.string().trim().min(1).max(100).nullish(),
  role: z.enum(ROLES),
  /** Defaults to the caller's mode. */
  mode: z.enum(MODES).nullish(),
});
export type CreateApiKeyInput = z.infer<typeof createApiKeyInput>;

export const ipAllowlistInput = z.object({
  entries: z.array(
    z.string().trim().refine((s) => parseCidr(s) !== undefined, { message: 'must be an IPv4 or IPv6 address or CIDR range' }),
  ).max(100),
});

export const auditExportInput = z.object({
  format: z.enum(AUDIT_EXPORT_FORMATS).default('json'),
  dateRange: z.string().regex(/^\d{1,3}d$/, 'must be a number of days such as 90d').default('90d')
    .refine((s) => Number(s.slice(0, -1)) >= 1 && Number(s.slice(0, -1)) <= 90, 'must be from 1d to 90d (audit logs are kept 90 days)'),
});
export type AuditExportInput = z.infer<typeof auditExportInput>;
