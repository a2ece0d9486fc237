import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

// Vite would otherwise resolve `graphql` twice (ESM and CJS): one copy for everything.
const graphqlEntry = fileURLToPath(import.meta.resolve('graphql'));

const INCLUDE = ['test/**/*.test.ts', 'src/**/*.test.ts', 'bench/**/*.test.ts'];
/**
 * Files that need a module graph of their own: they vi.mock a module (node:dns/promises,
 * libphonenumber-js) that the shared graph has already loaded for real, or declare an error code
 * of a made-up module in the process-wide registry (which the spec-table test then would see).
 */
const ISOLATED = ['test/webhooks.test.ts', 'src/platform/recipients.cache.test.ts', 'src/platform/errors.test.ts'];
/**
 * Live calls with RTP audio to and from baresip: they time what a far end hears, and a core starved
 * by the other files made them fail (the IVR greeting test, under a load average of 16). They run
 * after the others, one file at a time.
 */
const LIVE_VOICE = ['test/voice-live*.test.ts'];

export default defineConfig({
  resolve: { alias: { graphql: graphqlEntry } },
  test: {
    globalSetup: ['test/helpers/globalSetup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      // Each worker keeps its modules from file to file (no fresh process and module graph per
      // file): every file starts and closes its own app over its own database, and the process-wide
      // state the code keeps (caches of pure answers, the tracing globals it restores) is safe to share.
      { extends: true, test: { name: 'shared', include: INCLUDE, exclude: [...configDefaults.exclude, ...ISOLATED, ...LIVE_VOICE], isolate: false } },
      { extends: true, test: { name: 'isolated', include: ISOLATED, isolate: true } },
      { extends: true, test: { name: 'live-voice', include: LIVE_VOICE, isolate: true, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
