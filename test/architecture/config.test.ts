/**
 * Settings are documented where they are read: every environment variable `config.ts` reads is in
 * the configuration table of docs/operations.md (and the table names nothing else); every module's settings,
 * read through its config section, are in docs/configuration.md exactly as generated.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCoreConfig } from '../../src/config.ts';
import { loadConfig, moduleSettingsReference } from '../../src/modules/config.ts';
import { EnvReader } from '../../src/platform/env.ts';
import { MODULES } from '../../src/modules/index.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** `env.NAME` and `env[`PREFIX_${…}`]` in config.ts; a template becomes `PREFIX_*`. */
function variablesRead(): Set<string> {
  const source = readFileSync(path.join(root, 'src/config.ts'), 'utf8');
  const names = new Set<string>();
  for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)/g)) names.add(m[1]!);
  for (const m of source.matchAll(/\benv\[`([A-Z0-9_]+)\$\{[^}]*\}([A-Z0-9_]*)`\]/g)) names.add(`${m[1]}*${m[2]}`);
  return names;
}

/** The backquoted names in the first column of the table under `## Configuration`; `<NAME>` and `*` are wildcards. */
function documented(): string[] {
  const readme = readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
  const start = readme.search(/^## Configuration\s*$/m);
  expect(start, 'docs/operations.md has a ## Configuration section').toBeGreaterThanOrEqual(0);
  const rest = readme.slice(start + 1);
  const section = rest.slice(0, rest.search(/^## /m));
  const names: string[] = [];
  for (const line of section.split('\n')) {
    const cell = /^\|([^|]+)\|/.exec(line)?.[1];
    if (!cell) continue;
    for (const m of cell.matchAll(/`([A-Z][A-Z0-9_*<>]*)`/g)) names.push(m[1]!.replace(/<[A-Z]+>/g, '*'));
  }
  return names;
}

/** Every variable the modules' config sections read (in module order, repeats kept). */
function moduleVariables(): string[] {
  const core = loadCoreConfig({ APP_SECRET: 'x'.repeat(32) }, []);
  return MODULES.flatMap((m) => {
    if (!m.config) return [];
    const reader = new EnvReader({});
    m.config(reader, core);
    return reader.documented.map((d) => d.name);
  });
}

const pattern = (name: string) => new RegExp(`^${name.replace(/\*/g, '[A-Z0-9_]+')}$`);

describe('configuration table in docs/operations.md', () => {
  const read = variablesRead();
  const table = documented();

  it('reads a plausible set of variables from config.ts', () => {
    expect(read.size).toBeGreaterThan(25);
    expect(read.has('WEBHOOKS_ALLOW_LOOPBACK')).toBe(true);
    expect(read.has('PROVIDER_SECRET_*')).toBe(true);
  });

  it('documents every variable config.ts reads', () => {
    const missing = [...read].filter((v) => !table.some((d) => d === v || (!v.includes('*') && pattern(d).test(v))));
    expect(missing, 'add these to the configuration table in docs/operations.md').toEqual([]);
  });

  it('documents no variable config.ts does not read', () => {
    // A module's setting may be named (the dependency-timeouts table names LLM_BASE_URL); nothing unknown.
    const known = new Set([...read, ...moduleVariables()]);
    const extra = table.filter((d) => !known.has(d) && ![...known].some((v) => pattern(d).test(v)));
    expect(extra).toEqual([]);
  });

  it('gives the admission settings the defaults docs/operations.md states', () => {
    const readme = readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
    const stated = (name: string) => Number(new RegExp(`^\\| \`${name}\` \\| \`(\\d+)\``, 'm').exec(readme)?.[1]);
    const config = loadConfig({ APP_SECRET: 'x'.repeat(32) }, []);
    expect(config.httpMaxInFlight).toBe(64);
    expect(stated('HTTP_MAX_IN_FLIGHT')).toBe(config.httpMaxInFlight);
    expect(stated('HTTP_MAX_LOOP_DELAY_MS')).toBe(config.httpMaxLoopDelayMs);
    expect(stated('HTTP_LISTEN_BACKLOG')).toBe(config.httpListenBacklog);
    expect(stated('HTTP_ADMISSION_WAIT_MS')).toBe(config.httpAdmissionWaitMs);
  });

  it('points docs_url at this service\'s own error reference by default', () => {
    expect(loadConfig({ APP_SECRET: 'x'.repeat(32), PORT: '4100' }, []).docsBaseUrl).toBe('http://localhost:4100/docs/errors');
    expect(loadConfig({ APP_SECRET: 'x'.repeat(32), DOCS_BASE_URL: 'https://api.example.com/docs/errors' }, []).docsBaseUrl).toBe('https://api.example.com/docs/errors');
  });
});

describe('module settings (docs/configuration.md)', () => {
  it('is the reference generated from the modules\' config sections (run `npm run codegen`)', () => {
    expect(readFileSync(path.join(root, 'docs/configuration.md'), 'utf8')).toBe(moduleSettingsReference());
  });

  it('gives each module\'s section under the module\'s name, read from the environment', () => {
    const config = loadConfig({ APP_SECRET: 'x'.repeat(32), SANDBOX_CALL_RING_MS: '7', FLOWS_MAX_STEPS: '9', CAMPAIGN_BATCH_SIZE: '5000' }, []);
    expect(config.voice.sandbox.ringMs).toBe(7);
    expect(config.flows.maxSteps).toBe(9);
    expect(config.campaigns.batchSize).toBe(1000); // clamped to the documented maximum
    expect(() => loadConfig({ APP_SECRET: 'x'.repeat(32), FLOWS_MAX_STEPS: 'many' }, [])).toThrow(/FLOWS_MAX_STEPS must be a non-negative integer/);
  });

  it('no variable belongs to two places: the core table and a module section name different variables', () => {
    const core = variablesRead();
    const inSections = moduleVariables();
    expect(inSections.length).toBeGreaterThan(40);
    expect(inSections.filter((n) => core.has(n))).toEqual([]);
    expect(inSections.filter((n, i) => inSections.indexOf(n) !== i)).toEqual([]);
  });
});
