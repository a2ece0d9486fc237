import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { badRequest, ERROR_CODES, isServiceError, notFound, ServiceError, toServiceError, type ErrorCode } from './errors.ts';

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

describe('ERROR_CODES and the specification', () => {
  const spec = specErrorTable();

  it('reads a plausible error table from the spec', () => {
    expect(spec.size).toBeGreaterThanOrEqual(40);
    expect(spec.get('NOT_FOUND')).toEqual([404]);
    expect(spec.get('VALIDATION_ERROR')).toEqual([400, 422]);
  });

  it('has exactly the codes of the spec, and those it adds where the spec has none', () => {
    const added = specErrorTable('added');
    expect(added.size).toBeGreaterThan(0);
    for (const code of added.keys()) expect(spec.has(code), code).toBe(false);
    expect(Object.keys(ERROR_CODES).sort()).toEqual([...spec.keys(), ...added.keys()].sort());
    for (const [code, statuses] of added) expect(statuses, code).toContain((ERROR_CODES as Record<string, { status: number }>)[code]!.status);
  });

  it('gives every code the spec status', () => {
    for (const [code, statuses] of spec) {
      const ours = (ERROR_CODES as Record<string, { status: number } | undefined>)[code];
      expect(ours, code).toBeDefined();
      expect(statuses, `${code}: ours ${ours?.status}, spec ${statuses.join(' or ')}`).toContain(ours!.status);
    }
  });

  it('defaults VALIDATION_ERROR to 422 (400 is for malformed requests)', () => {
    expect(ERROR_CODES.VALIDATION_ERROR.status).toBe(422);
  });

  it('has a message for every code', () => {
    for (const [code, { message }] of Object.entries(ERROR_CODES)) {
      expect(message.length, code).toBeGreaterThan(0);
    }
  });
});

describe('ServiceError', () => {
  it('takes its status and default message from the table', () => {
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const e = new ServiceError(code);
      expect(e.code).toBe(code);
      expect(e.status).toBe(ERROR_CODES[code].status);
      expect(e.message).toBe(ERROR_CODES[code].message);
      expect(e.details).toEqual({});
      expect(e.headers).toEqual({});
      expect(e).toBeInstanceOf(Error);
      expect(isServiceError(e)).toBe(true);
    }
  });

  it('keeps message, details, status override and headers', () => {
    const e = new ServiceError('RATE_LIMIT_EXCEEDED', 'slow down', { retry_after: 3 }, { headers: { 'Retry-After': '3' } });
    expect(e.message).toBe('slow down');
    expect(e.details).toEqual({ retry_after: 3 });
    expect(e.headers).toEqual({ 'Retry-After': '3' });
    expect(e.status).toBe(429);
  });

  it('badRequest is VALIDATION_ERROR with HTTP 400', () => {
    const e = badRequest('bad JSON', { field: 'body' });
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(e.status).toBe(400);
    expect(e.details).toEqual({ field: 'body' });
  });

  it('notFound is NOT_FOUND 404 with the id', () => {
    const e = notFound('API key', 'key_x');
    expect(e.code).toBe('NOT_FOUND');
    expect(e.status).toBe(404);
    expect(e.message).toBe('API key not found');
    expect(e.details).toEqual({ id: 'key_x' });
    expect(notFound().details).toEqual({});
  });

  it('toServiceError keeps ServiceErrors and hides everything else as INTERNAL_ERROR', () => {
    const se = new ServiceError('CONFLICT');
    expect(toServiceError(se)).toBe(se);
    for (const thrown of [new Error('relation "audit_log_entries" does not exist'), new TypeError('x is undefined'), 'string', null, undefined, { code: 'NOT_FOUND' }]) {
      const e = toServiceError(thrown);
      expect(e.code).toBe('INTERNAL_ERROR');
      expect(e.status).toBe(500);
      expect(e.message).toBe(ERROR_CODES.INTERNAL_ERROR.message);
      expect(e.details).toEqual({});
      expect(isServiceError(thrown)).toBe(false);
    }
  });
});
