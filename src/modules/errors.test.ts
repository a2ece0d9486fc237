/**
 * The error table: what the platform (platform/errors.ts) and the modules (their manifests' `errors`)
 * declare together is exactly the specification's table plus the codes this service adds
 * (docs/errors.md), each with the table's status; and every module code has one owner.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { declaredErrorCodes, type ErrorCode } from '../platform/errors.ts';
import { MODULES } from './index.ts';

/** The specification's error table, kept in the repository as the project's own data. */
const TABLE_PATH = path.resolve(import.meta.dirname, '../../docs/errors.md');

/** The rows `| CODE | HTTP | Meaning |` of docs/errors.md, as code → allowed statuses: the spec's table, or (`added`) the codes this service adds. */
function specErrorTable(which: 'spec' | 'added' = 'spec'): Map<string, number[]> {
  const [spec, added = ''] = readFileSync(TABLE_PATH, 'utf8').split(/^## Codes this service adds$/m);
  const section = which === 'spec' ? spec! : added;
  const rows = new Map<string, number[]>();
  for (const line of section.split('\n')) {
    const m = /^\|\s*([A-Z][A-Z0-9_]*)\s*\|\s*([^|]+?)\s*\|/.exec(line);
    if (!m) continue;
    const statuses = [...m[2]!.matchAll(/\d{3}/g)].map((x) => Number(x[0]));
    if (statuses.length === 0) throw new Error(`Cannot read the HTTP status of ${m[1]} in docs/errors.md: "${m[2]}"`);
    if (rows.has(m[1]!)) throw new Error(`${m[1]} appears twice in docs/errors.md`);
    rows.set(m[1]!, statuses);
  }
  return rows;
}

describe('the error codes the platform and the modules declare, and the specification', () => {
  const spec = specErrorTable();
  const codes = declaredErrorCodes();

  it('reads a plausible error table from the spec', () => {
    expect(spec.size).toBeGreaterThanOrEqual(40);
    expect(spec.get('NOT_FOUND')).toEqual([404]);
    expect(spec.get('VALIDATION_ERROR')).toEqual([400, 422]);
  });

  it('has exactly the codes of the spec, and those it adds where the spec has none', () => {
    const added = specErrorTable('added');
    expect(added.size).toBeGreaterThan(0);
    for (const code of added.keys()) expect(spec.has(code), code).toBe(false);
    expect([...codes.keys()].sort()).toEqual([...spec.keys(), ...added.keys()].sort());
    for (const [code, statuses] of added) expect(statuses, code).toContain(codes.get(code as ErrorCode)!.status);
  });

  it('gives every code the spec status', () => {
    for (const [code, statuses] of spec) {
      const ours = codes.get(code as ErrorCode);
      expect(ours, code).toBeDefined();
      expect(statuses, `${code}: ours ${ours?.status}, spec ${statuses.join(' or ')}`).toContain(ours!.status);
    }
  });

  it('defaults VALIDATION_ERROR to 422 (400 is for malformed requests)', () => {
    expect(codes.get('VALIDATION_ERROR')!.status).toBe(422);
  });

  it('has a message for every code', () => {
    for (const [code, { message }] of codes) {
      expect(message.length, code).toBeGreaterThan(0);
    }
  });
});

describe('module error codes', () => {
  it('are registered under the module that declares them', () => {
    for (const m of MODULES) {
      for (const code of Object.keys((m as { errors?: object }).errors ?? {})) expect(declaredErrorCodes().get(code as ErrorCode)?.owner, code).toBe(m.name);
    }
    expect(declaredErrorCodes().get('CALL_NOT_FOUND')?.owner).toBe('voice');
    expect(declaredErrorCodes().get('NOT_FOUND')?.owner).toBe('platform');
  });
});
