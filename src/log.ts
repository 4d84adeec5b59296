/**
 * pino, with every place a key or credential could appear redacted. Keys are
 * never logged; a user id and a key id are enough to follow a request.
 */
import { writeSync } from 'node:fs';
import pino, { type Logger } from 'pino';
import { CONFIG_REDACT_PATHS } from './config/schema.js';

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
  ...CONFIG_REDACT_PATHS,
];

/**
 * Where lines go: stdout (or a file, for benchmarks), never on the request path. Lines are held
 * until 16 KB have gathered or 50 ms have passed since the first, then handed to SonicBoom as one
 * asynchronous write. Handing it every line cost 2.1-3.4 µs of CPU per line in isolation, against
 * 0.9-1.2 held (`npx tsx bench/tools/log-destination.ts`): each async write is a trip through
 * libuv's thread pool, about 10 µs here. A synchronous write per line costs about as little as
 * holding in isolation, but would stall every request whenever the reader of stdout falls behind. Any exit through Node,
 * process.exit and an uncaught exception included, writes what is held; a SIGKILL loses at most
 * the last 50 ms.
 */
export function logDestination(dest: number | string = 1): HeldDestination {
  return new HeldDestination(pino.destination({ dest, sync: false }));
}

/** SonicBoom, which pino builds; its `fd` is public but not in its type declarations. */
type Sink = ReturnType<typeof pino.destination>;

export const HOLD_BYTES = 16 * 1024;
export const HOLD_MS = 50;

const held = new Set<HeldDestination>();
let exitHooked = false;

export class HeldDestination {
  private pending = '';
  private timer: NodeJS.Timeout | null = null;
  /** A write handed to SonicBoom is under way; it says 'drain' when all it took is written. */
  private writing = false;
  /** The last write error since everything was last written; flush reports it. */
  private failed: Error | null = null;
  /** stdout's reader is gone (EPIPE): pino made the sink's write a no-op, nothing more is written. */
  private closed = false;
  private flushed: Array<(err?: Error) => void> = [];

  constructor(private readonly sink: Sink) {
    held.add(this);
    sink.on('close', () => held.delete(this));
    sink.on('drain', () => {
      this.writing = false;
      this.failed = null;
      for (const cb of this.flushed.splice(0)) cb();
    });
    // Without a listener of ours, a write error other than EPIPE would be thrown from an event and
    // end the process: a log sink is not worth a gateway. pino's own listener re-emits such an
    // error once, so the same error arrives here twice.
    sink.on('error', (err: Error & { code?: string }) => {
      if (err === this.failed) return;
      this.writing = false;
      this.failed = err;
      if (err.code === 'EPIPE') {
        this.closed = true;
        this.pending = '';
        process.stderr.write('sluice: stdout is closed (EPIPE); log lines are dropped from now on\n');
      } else {
        process.stderr.write(`sluice: log write failed: ${err.message}\n`);
      }
      for (const cb of this.flushed.splice(0)) cb(err);
    });
    if (!exitHooked) {
      exitHooked = true;
      // Runs after pino's own exit hook for the sink (registered when the sink was built), so
      // what SonicBoom holds goes out first, then the lines held here.
      process.on('exit', () => {
        for (const d of held) d.flushSync();
      });
    }
  }

  write(line: string): void {
    if (this.closed) return;
    this.pending += line;
    if (this.pending.length >= HOLD_BYTES) this.handOn();
    else if (this.timer === null) this.timer = setTimeout(this.handOn, HOLD_MS).unref();
  }

  private readonly handOn = (): void => {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending === '') return;
    const out = this.pending;
    this.pending = '';
    this.writing = true;
    this.sink.write(out);
  };

  /**
   * pino's `logger.flush(cb)`: cb runs once every line written so far is written out, or with the
   * write error that kept some from it (SonicBoom keeps a failed write's lines and tries them
   * again with the next write, or at exit).
   */
  flush(cb?: (err?: Error) => void): void {
    this.handOn();
    if (this.writing) {
      if (cb) this.flushed.push(cb);
      return;
    }
    const err = this.failed ?? undefined;
    cb?.(err);
  }

  /**
   * At exit, when no callback will run again: everything held, written synchronously. A batch
   * SonicBoom is writing at that moment (at most 16 KB) cannot be waited for: it may land after
   * the lines written here, or be lost if the process ends first. The drain on SIGTERM flushes
   * with a callback first, so it never leaves one under way.
   */
  flushSync(): void {
    if (this.closed) return;
    try {
      this.sink.flushSync();
      if (this.pending !== '') writeSync((this.sink as unknown as { fd: number }).fd, this.pending);
      this.pending = '';
    } catch {
      // Not open yet, or closed: there is nowhere to write.
    }
  }
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
