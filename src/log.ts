/**
 * pino, with every place a key or credential could appear redacted. Keys are
 * never logged; a user id and a key id are enough to follow a request.
 */
import pino, { type Logger } from 'pino';

/**
 * Named exactly, never with wildcards: a wildcard path (`*.key`) makes pino walk every field of
 * every line, the per-request access line included. The
 * only nested object sluice logs is the config on reload, already through publicConfig; its
 * secrets are named here as well, in case that ever changes.
 */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-goog-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  'key',
  'credential',
  'adminToken',
  'token',
  'config.adminToken',
  'config.upstream.credential',
  'config.redis.url',
];

/**
 * Where lines go: stdout (or a file, for benchmarks), written asynchronously so a slow reader never
 * stalls a request. SonicBoom gathers lines until HOLD_BYTES have built up and writes them in one
 * go, and writes whatever is gathered every HOLD_MS (`periodicFlush`), so a quiet gateway's lines
 * still appear promptly; each asynchronous write is a trip through libuv's thread pool, which one
 * write per line would pay per request. pino flushes the destination synchronously on any exit
 * through Node (process.exit and an uncaught exception included); the drain on SIGTERM flushes it
 * with `logger.flush` first. A SIGKILL loses at most the last HOLD_MS.
 */
export function logDestination(dest: number | string = 1): LogDestination {
  const sink = pino.destination({ dest, sync: false, minLength: HOLD_BYTES, maxWrite: MAX_WRITE, periodicFlush: HOLD_MS });
  reportWriteErrors(sink);
  return sink;
}

export type LogDestination = ReturnType<typeof pino.destination>;

export const HOLD_BYTES = 16 * 1024;
export const HOLD_MS = 50;
/** SonicBoom requires minLength below maxWrite (16 KB by default): one write takes up to this much. */
const MAX_WRITE = 4 * HOLD_BYTES;

/**
 * A log sink is not worth a gateway: without a listener of ours, a write error other than EPIPE
 * would be thrown from an event and end the process (pino's own listener swallows EPIPE, makes
 * the sink's write a no-op from then on, and re-emits any other error). Said once on stderr until
 * a write succeeds again, since SonicBoom keeps a failed write's lines and tries them again at
 * every flush.
 */
function reportWriteErrors(sink: LogDestination): void {
  let said = false;
  let closed = false;
  sink.on('write', () => {
    said = false;
  });
  sink.on('error', (err: NodeJS.ErrnoException) => {
    if (said || closed) return;
    said = true;
    if (err.code === 'EPIPE') {
      closed = true;
      process.stderr.write('sluice: stdout is closed (EPIPE); log lines are dropped from now on\n');
    } else {
      process.stderr.write(`sluice: log write failed: ${err.message}\n`);
    }
  });
}

/**
 * pino's `isoTime`, formatted once per millisecond: under load many lines share one.
 */
let stampMs = -1;
let stamp = '';
export function isoTimeCached(): string {
  const now = Date.now();
  if (now !== stampMs) {
    stampMs = now;
    stamp = `,"time":"${new Date(now).toISOString()}"`;
  }
  return stamp;
}

/**
 * pino writes a short string's lone surrogate (half of a UTF-16 pair, from a client's path or
 * model) raw, and it reaches the log as U+FFFD; escaped (`\ud800`), the line reads back as sent.
 * Paired surrogates are left alone.
 */
const LONE_SURROGATE = /\p{Cs}/gu;
export function escapeLoneSurrogates(line: string): string {
  return (line as string & { isWellFormed(): boolean }).isWellFormed()
    ? line
    : line.replace(LONE_SURROGATE, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/** sluice's logger options: what every line of `createLogger` is written with. */
export function loggerOptions(level: string): pino.LoggerOptions {
  return {
    level,
    base: { svc: 'sluice' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: isoTimeCached,
    hooks: { streamWrite: escapeLoneSurrogates },
  };
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(loggerOptions(level), destination ?? logDestination());
}
