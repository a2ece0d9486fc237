/** Structured JSON logs. Secrets are redacted by path; request logs carry the request id. */
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
  return destination ? pino(options, destination) : pino(options);
}
