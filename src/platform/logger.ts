/**
 * Structured logs. Secrets are redacted by path; request logs carry the request id. JSON lines,
 * except on a terminal: `npm start` in a terminal prints one readable line per entry
 * ({@link prettyLine}), the same fields, so a person can follow it; piped or redirected, it is JSON.
 */
import { Writable } from 'node:stream';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: undefined,
    redact: {
      paths: [
        'headers["x-api-key"]', 'headers.authorization', 'headers.cookie',
        '*.password', '*.secret', '*.key', '*.token', '*.signing_secret', '*.apiKey', '*.api_key',
      ],
      censor: '[redacted]',
    },
  };
  if (destination) return pino(options, destination);
  return process.stdout.isTTY ? pino(options, prettyStdout()) : pino(options);
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 40: '\x1b[33m', 50: '\x1b[31m', 60: '\x1b[31m' };

/**
 * One JSON log line as a person reads it: time, level, message, then the other fields as
 * `key=value`; a request line reads `POST /v1/messages/sms 201 4ms messaging.sendSms` with its
 * error code when it failed. An error's stack follows on its own lines.
 */
export function prettyLine(json: string, colour = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { time, level, msg, err, ...rest } = entry;
  const at = typeof time === 'number' ? new Date(time).toISOString().slice(11, 23) : '';
  const lvl = typeof level === 'number' ? (LEVELS[level] ?? String(level)) : '';
  const paint = colour && typeof level === 'number' && COLOURS[level] ? (s: string) => `${COLOURS[level as number]}${s}\x1b[0m` : (s: string) => s;
  let head = String(msg ?? '');
  let other = rest;
  if (msg === 'request') {
    const { method, path, status, ms, operation, code, ...others } = rest;
    head = [method, path, status, `${String(ms)}ms`, operation, code].filter((p) => p !== undefined && p !== '').join(' ');
    other = others;
  }
  const fields = Object.entries(other).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
  const error = err && typeof err === 'object' ? `\n${String((err as { stack?: unknown }).stack ?? (err as { message?: unknown }).message ?? JSON.stringify(err))}` : '';
  return `${at} ${paint(lvl)} ${head}${fields ? `  ${fields}` : ''}${error}`;
}

/** pino's JSON lines, written to stdout as {@link prettyLine}s. */
function prettyStdout(): DestinationStream {
  let partial = '';
  const colour = process.stdout.hasColors?.() ?? false;
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      process.stdout.write(lines.map((l) => `${prettyLine(l, colour)}\n`).join(''), () => done());
    },
  });
}
