/** Verify's settings (`config.verify`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function verifyConfig(env: EnvReader) {
  return {
    /** Code lifetime when the organization has not set its own (PUT /v1/verify/settings). */
    codeTtlSeconds: env.int('VERIFY_CODE_TTL_SECONDS', 600, 'verification code lifetime when the organization has not set one', { min: 60, max: 86_400 }),
    /** Abuse limits on sends: per recipient address, and per organization and mode (sliding windows). */
    recipientSends: env.int('VERIFY_RECIPIENT_SENDS', 5, 'verify sends per recipient address per window', { min: 1 }),
    recipientWindowSeconds: env.int('VERIFY_RECIPIENT_WINDOW_SECONDS', 600, 'the per-recipient window', { min: 1 }),
    organizationSends: env.int('VERIFY_ORGANIZATION_SENDS', 1000, 'verify sends per organization and mode per window', { min: 1 }),
    organizationWindowSeconds: env.int('VERIFY_ORGANIZATION_WINDOW_SECONDS', 3600, 'the per-organization window', { min: 1 }),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { verify: ReturnType<typeof verifyConfig> }
}
