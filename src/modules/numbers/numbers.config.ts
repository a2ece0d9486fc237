/** Numbers' settings (`config.numbers`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function numbersConfig(env: EnvReader) {
  return {
    /** Sandbox ports: pending → submitted after portSubmitMs, then completed (or rejected) portCompleteMs later. */
    sandbox: {
      portSubmitMs: env.int('SANDBOX_PORT_SUBMIT_MS', 5_000, 'sandbox number ports: pending → submitted after this'),
      portCompleteMs: env.int('SANDBOX_PORT_COMPLETE_MS', 30_000, 'sandbox number ports: submitted → completed (or rejected) after this'),
    },
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { numbers: ReturnType<typeof numbersConfig> }
}
