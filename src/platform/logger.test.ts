import { describe, expect, it } from 'vitest';
import { prettyLine } from './logger.ts';

describe('prettyLine', () => {
  it('reads a request line as method, path, status, time, operation and error code', () => {
    const line = JSON.stringify({ level: 30, time: Date.UTC(2026, 10, 29, 6, 40, 1, 5), msg: 'request', request_id: 'req_1', method: 'POST', path: '/v1/messages/sms', status: 422, ms: 4, operation: 'messaging.sendSms', code: 'VALIDATION_ERROR' });
    expect(prettyLine(line)).toBe('06:40:01.005 INFO  POST /v1/messages/sms 422 4ms messaging.sendSms VALIDATION_ERROR  request_id=req_1');
  });

  it('prints other entries as message and key=value fields, and an error with its stack', () => {
    const line = JSON.stringify({ level: 50, time: 0, msg: 'unexpected error', request_id: 'req_2', err: { message: 'boom', stack: 'Error: boom\n    at x' } });
    expect(prettyLine(line)).toBe('00:00:00.000 ERROR unexpected error  request_id=req_2\nError: boom\n    at x');
    expect(prettyLine(JSON.stringify({ level: 40, time: 0, msg: 'slow', counts: { a: 1 } }), true)).toBe('00:00:00.000 \x1b[33mWARN \x1b[0m slow  counts={"a":1}');
  });

  it('leaves a line that is not JSON as it is', () => {
    expect(prettyLine('plain text')).toBe('plain text');
  });
});
