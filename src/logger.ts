import pino, { type Logger } from 'pino';
import type { Config } from './config/index.js';

/** JSON logs on stdout. Key values never reach a log line: the header is redacted. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' },
      base: { pid: process.pid },
    },
    destination,
  );
}
