import { describe, expect, it } from 'vitest';
import { badRequest, declaredErrorCodes, errorDefinition, isServiceError, notFound, PLATFORM_ERROR_CODES, registerErrorCodes, ServiceError, toServiceError, type ErrorCode } from './errors.ts';

describe('codes declared by modules', () => {
  it('registers a module\'s codes once, refuses another owner, and fails loudly on an undeclared code', () => {
    expect(() => new ServiceError('TEST_ONLY_CODE' as ErrorCode)).toThrow(/declared neither by the platform nor by a loaded module/);
    registerErrorCodes('testmod', { TEST_ONLY_CODE: { status: 418, message: 'A teapot' } });
    const e = new ServiceError('TEST_ONLY_CODE' as ErrorCode);
    expect([e.status, e.message]).toEqual([418, 'A teapot']);
    expect(declaredErrorCodes().get('TEST_ONLY_CODE' as ErrorCode)?.owner).toBe('testmod');
    registerErrorCodes('testmod', { TEST_ONLY_CODE: { status: 418, message: 'A teapot' } });
    expect(() => registerErrorCodes('othermod', { TEST_ONLY_CODE: { status: 400, message: 'x' } })).toThrow(/already declared by testmod/);
    expect(() => registerErrorCodes('othermod', { NOT_FOUND: { status: 404, message: 'x' } })).toThrow(/already declared by platform/);
    expect(() => registerErrorCodes('othermod', { lower_case: { status: 400, message: 'x' } })).toThrow(/UPPER_SNAKE_CASE/);
    expect(errorDefinition('NOT_FOUND').status).toBe(404);
  });
});

describe('ServiceError', () => {
  it('takes its status and default message from the table', () => {
    for (const code of Object.keys(PLATFORM_ERROR_CODES) as ErrorCode[]) {
      const e = new ServiceError(code);
      expect(e.code).toBe(code);
      expect(e.status).toBe(PLATFORM_ERROR_CODES[code as keyof typeof PLATFORM_ERROR_CODES].status);
      expect(e.message).toBe(PLATFORM_ERROR_CODES[code as keyof typeof PLATFORM_ERROR_CODES].message);
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
      expect(e.message).toBe(PLATFORM_ERROR_CODES.INTERNAL_ERROR.message);
      expect(e.details).toEqual({});
      expect(isServiceError(thrown)).toBe(false);
    }
  });
});
