/** Compliance's settings (`config.compliance`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function complianceConfig(env: EnvReader) {
  return {
    /** Sandbox registry: brand vetting and campaign review times (ms). */
    sandbox: {
      vettingMs: env.int('SANDBOX_BRAND_VETTING_MS', 10_000, 'sandbox 10DLC registry: brand vetting time'),
      reviewMs: env.int('SANDBOX_CAMPAIGN_REVIEW_MS', 20_000, 'sandbox 10DLC registry: campaign review time'),
    },
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { compliance: ReturnType<typeof complianceConfig> }
}
