/**
 * The platform knows no module: what a module adds (id prefixes, error codes, admin commands,
 * rate-limit rows, settings) is declared in its manifest only, and reaches the platform's registries
 * through the module list.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MODULES } from '../../src/modules/index.ts';
import type { ModuleManifest } from '../../src/modules/manifest.ts';
import { ID_PREFIXES, newId, typeNameOfId, type IdPrefix } from '../../src/platform/ids.ts';
import { declaredErrorCodes, PLATFORM_ERROR_CODES } from '../../src/platform/errors.ts';
import { endpointLimit } from '../../src/platform/ratelimit/plans.ts';

const root = path.resolve(import.meta.dirname, '../..');

describe('id prefixes come from the manifests', () => {
  it('every prefix a manifest declares names its type once the module list is loaded, and none is the platform\'s', () => {
    const declared = (MODULES as readonly ModuleManifest[]).flatMap((m) => Object.entries(m.ids ?? {}));
    expect(declared.length).toBeGreaterThan(30);
    for (const [prefix, type] of declared) {
      expect(Object.keys(ID_PREFIXES), prefix).not.toContain(prefix);
      expect(typeNameOfId(newId(prefix as IdPrefix)), prefix).toBe(type);
    }
    expect(new Set(declared.map(([p]) => p)).size).toBe(declared.length);
    expect(typeNameOfId(newId('call'))).toBe('Call');
  });

  it('src/platform/ids.ts and src/config.ts name no module', () => {
    for (const file of ['src/platform/ids.ts', 'src/config.ts']) {
      const source = readFileSync(path.join(root, file), 'utf8');
      expect(source, file).not.toMatch(/from '[^']*modules\//);
      for (const m of MODULES) expect(source, `${file} names ${m.name}`).not.toMatch(new RegExp(`'(Message|Call|Contact|Flow|Campaign|Agent|PhoneNumber|Verification|WebhookEndpoint)'`));
    }
  });
});

describe('rate-limit rows come from the operations', () => {
  it('the specification\'s rows hold for the endpoints whose operations declare them; the rest read or write', () => {
    expect(endpointLimit('starter', 'POST /v1/voice/calls')).toBe(10);
    expect(endpointLimit('enterprise', 'POST /v1/messages/email')).toBe(6000);
    expect(endpointLimit('growth', 'POST /v1/agents/{id}/chat')).toBe(120);
    expect(endpointLimit('business', 'GET /v1/numbers/available')).toBe(300);
    expect(endpointLimit('starter', 'POST /v1/webhooks')).toBe(10);
    expect(endpointLimit('growth', 'GET /v1/billing/usage/history')).toBe(60);
    expect(endpointLimit('enterprise', 'GET /v1/billing/invoices/{id}/pdf')).toBe(120);
    expect(endpointLimit('starter', 'GET /v1/flows')).toBe(120);
    expect(endpointLimit('starter', 'POST /v1/flows')).toBe(60);
  });

  it('platform/ratelimit/plans.ts names no endpoint', () => {
    expect(readFileSync(path.join(root, 'src/platform/ratelimit/plans.ts'), 'utf8')).not.toMatch(/'(GET|POST|PUT|PATCH|DELETE) \/v1\//);
  });
});

describe('error codes come from the manifests', () => {
  it('each module code is registered under its module, and platform/errors.ts names none of them', () => {
    const source = readFileSync(path.join(root, 'src/platform/errors.ts'), 'utf8');
    let moduleCodes = 0;
    for (const m of MODULES as readonly ModuleManifest[]) {
      for (const code of Object.keys(m.errors ?? {})) {
        moduleCodes++;
        expect(Object.keys(PLATFORM_ERROR_CODES), code).not.toContain(code);
        expect(source, `platform/errors.ts names ${m.name}'s ${code}`).not.toContain(code);
        expect(declaredErrorCodes().get(code as never)?.owner).toBe(m.name);
      }
    }
    expect(moduleCodes).toBeGreaterThan(20);
  });
});

describe('admin commands come from the manifests', () => {
  it('src/admin.ts imports no module but the module list and the manifest types', () => {
    const source = readFileSync(path.join(root, 'src/admin.ts'), 'utf8');
    const moduleImports = [...source.matchAll(/(?:from |import\()'(\.\/modules\/[^']+)'/g)].map((m) => m[1]);
    expect(moduleImports.length).toBeGreaterThan(0);
    for (const spec of moduleImports) expect(['./modules/index.ts', './modules/manifest.ts', './modules/config.ts'], spec).toContain(spec);
  });

  it('the modules declare the commands of what they own', () => {
    const owner = (command: string) => (MODULES as readonly ModuleManifest[]).find((m) => command in (m.commands ?? {}))?.name;
    expect(owner('org create')).toBe('settings');
    expect(owner('key create')).toBe('settings');
    expect(owner('org plan')).toBe('billing');
    expect(owner('hipaa rewrap-keys')).toBe('hipaa');
  });
});
