/**
 * pino, with every place a key or credential could appear redacted. Keys are
 * never logged; a user id and a key id are enough to follow a request.
 */
import pino, { type Logger } from 'pino';

/**
 * Named exactly, never with wildcards: a wildcard path (`*.key`) makes pino walk every field of
 * every line, which doubled the cost of the per-request access line (about 13 µs against 7). The
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
 * Where lines go: stdout (or a file, for benchmarks), written asynchronously so that stdout is
 * never on the request path. Any exit through Node, process.exit included, writes what is still
 * held (pino does). Batching writes (SonicBoom's minLength) was measured and not kept: two A/B runs
 * disagreed on its sign, within this machine's noise, and it would delay lines by up to a second.
 */
export function logDestination(dest: number | string = 1): pino.DestinationStream {
  return pino.destination({ dest, sync: false });
}

/**
 * pino's `isoTime`, formatted once per millisecond: under load many lines share one, and
 * `toISOString` was about a sixth of the access line's cost.
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

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { svc: 'sluice' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: isoTimeCached,
    },
    destination ?? logDestination(),
  );
}
