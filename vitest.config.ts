import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Vite would otherwise resolve `graphql` twice (ESM and CJS): one copy for everything.
const graphqlEntry = fileURLToPath(import.meta.resolve('graphql'));

export default defineConfig({
  resolve: { alias: { graphql: graphqlEntry } },
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts', 'bench/**/*.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
