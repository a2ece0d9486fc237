/** The HIPAA context's admin commands: re-wrapping data keys after a master key rotation, and a new data key version. */
import pg from 'pg';
import { LocalKeyManagement } from '../../providers/kms/local.ts';
import type { AdminCommand, AdminContext } from '../manifest.ts';
import { KeyRing } from './hipaa.keys.ts';

async function withKeyRing<T>(ctx: AdminContext, use: (keys: KeyRing) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 1 });
  try {
    return await use(new KeyRing({ pool, kms: new LocalKeyManagement(ctx.config.hipaa.masterKeys), clock: ctx.clock }));
  } finally {
    await pool.end();
  }
}

export const HIPAA_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'hipaa rewrap-keys': {
    usage: 'hipaa rewrap-keys [--json]',
    summary: 'Re-wraps every HIPAA data key under the current master key (the first of HIPAA_MASTER_KEYS), after a master key rotation; safe while the service runs (the daily hipaa.rewrap-keys job does the same).',
    async run(ctx) {
      const rewrapped = await withKeyRing(ctx, (keys) => keys.rewrapAll());
      const master = ctx.config.hipaa.masterKeys[0]!.id;
      ctx.out({ rewrapped, master_key_id: master }, `${rewrapped} data keys re-wrapped under ${master}`);
    },
  },
  'hipaa rotate-data-key': {
    usage: 'hipaa rotate-data-key --org ID [--json]',
    summary: 'Adds a new data key version for the organization: new PHI is sealed under it, older values still open. Instances pick it up as they load the key ring.',
    options: ['org'],
    async run(ctx) {
      const org = ctx.option('org');
      if (!org) return ctx.fail('--org is required');
      const version = await withKeyRing(ctx, (keys) => keys.rotateDataKey(org));
      ctx.out({ organization_id: org, version }, `data key version ${version} of ${org}`);
    },
  },
};
