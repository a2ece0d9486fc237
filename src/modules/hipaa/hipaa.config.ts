/** HIPAA mode's settings (`config.hipaa`); documented in docs/configuration.md. */
import { createHmac } from 'node:crypto';
import type { CoreConfig } from '../../config.ts';
import type { EnvReader } from '../../platform/env.ts';
import { parseMasterKeys } from '../../providers/kms/local.ts';

export function hipaaConfig(env: EnvReader, core: CoreConfig) {
  return {
    /** Master keys wrapping the organizations' PHI data keys, the current one first. */
    masterKeys: env.parsed('HIPAA_MASTER_KEYS', 'one key derived from `APP_SECRET`',
      'master keys wrapping each organization\'s PHI data key: comma-separated `id:base64` (32 random bytes each), the current one first; **set it in production** (see HIPAA mode)',
      (value) => value ? parseMasterKeys(value) : [{ id: 'app-secret', key: createHmac('sha256', core.appSecret).update('hipaa:master-key').digest() }]),
    /** How long an instance trusts its cached view of an organization's HIPAA mode (then it reads it again). */
    modeCacheMs: env.int('HIPAA_MODE_CACHE_MS', 1000, 'how long an instance trusts its cached view of an organization\'s HIPAA mode'),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { hipaa: ReturnType<typeof hipaaConfig> }
}
