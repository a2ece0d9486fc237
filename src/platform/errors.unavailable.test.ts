import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, ServiceError, toServiceError } from './errors.ts';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('database unavailable → SERVICE_UNAVAILABLE', () => {
  it('recognizes socket errors, connection SQLSTATEs and pool timeouts, also wrapped as a cause', () => {
    for (const e of [
      withCode('ECONNREFUSED'), withCode('57P01'), withCode('57P03'), withCode('08006'), withCode('53300'), withCode('57014'),
      new Error('timeout exceeded when trying to connect'), new Error('Connection terminated unexpectedly'),
      new Error('wrapped', { cause: withCode('ECONNRESET') }), new AggregateError([withCode('ECONNREFUSED')], 'connect failed'),
      withCode('55000', 'database "x" is not currently accepting connections'),
    ]) {
      expect(isDatabaseUnavailable(e)).toBe(true);
      const se = toServiceError(e);
      expect(se.code).toBe('SERVICE_UNAVAILABLE');
      expect(se.status).toBe(503);
      expect(se.headers['Retry-After']).toBe('5');
    }
  });

  it('leaves other errors as INTERNAL_ERROR and service errors as they are', () => {
    for (const e of [new Error('boom'), withCode('23505', 'duplicate key'), withCode('42P01', 'relation does not exist'), 'text', null]) {
      expect(isDatabaseUnavailable(e)).toBe(false);
      expect(toServiceError(e).code).toBe('INTERNAL_ERROR');
    }
    const own = new ServiceError('NOT_FOUND');
    expect(toServiceError(own)).toBe(own);
  });
});
