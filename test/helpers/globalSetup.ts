/**
 * Picks the test PostgreSQL (TEST_DATABASE_URL, else the machine's 127.0.0.1:5432 when it answers,
 * else an embedded cluster) and builds a template database with migrations and pg-boss's schema
 * applied. Each test file then clones it (CREATE DATABASE … TEMPLATE), which isolates files.
 * Migrations run as the admin (owner) role; the service under test runs as SERVICE_ROLE, which owns
 * nothing (created once per cluster when missing; its grants are in the template, so every clone
 * has them), as in production.
 */
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { PgBoss } from 'pg-boss';
import { ensureLoginRole, startEmbeddedPostgres } from '../../src/platform/db/embedded.ts';
import { grantServiceRole } from '../../src/platform/db/roles.ts';
import { createOrm, runMigrations, PGBOSS_SCHEMA } from '../../src/platform/db/orm.ts';
import { ENTITIES } from '../../src/modules/index.ts';
import { loadConfig } from '../../src/modules/config.ts';
import { createApp } from '../../src/app.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    /** The role test apps run as (owns nothing; see src/platform/db/roles.ts), and its password. */
    pgServiceRole: { name: string; password: string };
  }
}

function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.setTimeout(1000, () => { s.destroy(); resolve(false); });
  });
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

const SERVICE_ROLE = { name: 'omni_test_app', password: 'omni_test_app' };

type Prepared = { adminUrl: string; template: string; teardown(): Promise<void> };

/**
 * Vitest runs the global setup once for the root and once per project (vitest.config.ts): one
 * template serves them all, built by the first and dropped by the last teardown.
 */
const shared = globalThis as { omniTestTemplate?: { prepared: Promise<Prepared>; users: number } };

export default async function setup(project: TestProject) {
  shared.omniTestTemplate ??= { prepared: prepare(), users: 0 };
  const entry = shared.omniTestTemplate;
  entry.users++;
  const { adminUrl, template } = await entry.prepared;
  project.provide('pgServiceRole', SERVICE_ROLE);
  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);
  return async () => {
    if (--entry.users > 0) return;
    delete shared.omniTestTemplate;
    await (await entry.prepared).teardown();
  };
}

async function prepare(): Promise<Prepared> {
  let adminUrl = process.env.TEST_DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!adminUrl) {
    if (await answers('127.0.0.1', 5432)) {
      adminUrl = 'postgres://postgres@127.0.0.1:5432/postgres';
    } else {
      const embedded = await startEmbeddedPostgres(path.join(os.tmpdir(), 'omnichannel-test-pg'), 54339, 'postgres');
      adminUrl = embedded.migrationUrl;
      stopEmbedded = embedded.stop;
    }
  }
  const template = `omni_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists "${template}"`);
  await admin.query(`create database "${template}"`);
  const templateUrl = withDatabase(adminUrl, template);
  const orm = await createOrm(templateUrl, { entities: ENTITIES, poolMax: 2 });
  await runMigrations(orm);
  await orm.close();
  const boss = new PgBoss({ connectionString: templateUrl, schema: PGBOSS_SCHEMA, supervise: false, schedule: false });
  await boss.start();
  await boss.stop({ graceful: false, close: true });
  await ensureLoginRole(adminUrl, SERVICE_ROLE.name, SERVICE_ROLE.password);
  const owner = new pg.Client({ connectionString: templateUrl });
  await owner.connect();
  await grantServiceRole(owner, SERVICE_ROLE.name);
  await owner.end();
  await createJobQueues(templateUrl);
  return { adminUrl, template, teardown: async () => {
    // Drop the template and any clone whose drop did not finish (the file's worker exited first, or crashed).
    const { rows } = await admin.query(`select datname from pg_database where datname like 'omni_t%' and datname like $1`, [`%_${process.pid}%`]);
    await admin.end();
    // At once, each over its own connection: their checkpoints (see dropTestDatabase) coalesce.
    await Promise.all(rows.map(async (r) => {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try { await c.query(`drop database if exists "${r.datname}" with (force)`); } finally { await c.end(); }
    }));
    if (stopEmbedded) await stopEmbedded();
  } };
}

/**
 * pg-boss's queues, as an app's first start creates them (one per registered job): in the template,
 * every test app starts as a restarted service does, finding them (src/platform/jobs/jobs.ts).
 */
async function createJobQueues(url: string): Promise<void> {
  const config = loadConfig({ APP_SECRET: 'template-app-secret-0123456789abcdef', DATABASE_URL: url, LOG_LEVEL: 'silent', DATA_DIR: path.join(os.tmpdir(), 'omnichannel-test-data') }, []);
  const app = await createApp({ config, databaseUrl: url });
  await app.start({ workers: false });
  await app.stop();
}
