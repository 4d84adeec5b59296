/**
 * pino, with every place a key or credential could appear redacted. Keys are
 * never logged; a user id and a key id are enough to follow a request.
 */
import type { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { KEY_HEADERS, PROTOCOL_KEY_HEADER } from '../auth/credentials.js';
import { CONFIG_REDACT_PATHS, REDACTED } from '../config/schema.js';
import { TurnBatch } from '../runtime/turn-batch.js';

/**
 * Named exactly, never with wildcards: a wildcard path (`*.key`) makes pino walk every field of
 * every line, the per-request access line included. The
 * only nested object sluice logs is the config on reload, already through publicConfig; its
 * secrets are named here as well, in case that ever changes. No access-line field is named here:
 * that line is built without pino's redaction (src/log/access.ts), and its test fails if one is.
 */
const REDACT_PATHS = [
  ...[...KEY_HEADERS, PROTOCOL_KEY_HEADER].flatMap((name) => [`req.headers["${name}"]`, `headers["${name}"]`]),
  'key',
  'credential',
  'adminToken',
  'token',
  ...CONFIG_REDACT_PATHS,
];

/**
 * Where lines go: stdout (or a file, for benchmarks), written asynchronously by SonicBoom so that a
 * slow reader never stalls a request. SonicBoom gathers the lines (its `minLength`: HOLD_BYTES) and
 * writes them as one; a timer bounds how long a line waits there (HOLD_MS), as pino's docs advise
 * for `minLength`. The timer runs until every byte handed on is written: a flush that finds a write
 * under way does nothing, and SonicBoom leaves what is below `minLength` held when that write ends.
 * (Its own `periodicFlush` would write every HOLD_MS even when idle, and on after stdout closed.)
 * While stdout's reader does not read, SonicBoom holds at most `maxBytes` (its `maxLength`); lines
 * past it are dropped, said on stderr, rather than growing the process until it is killed.
 * SonicBoom does the rest: the writes, retrying a failed one, `flush` calling back once all is
 * written, and the synchronous flush pino registers for exit. Any exit through Node,
 * process.exit and an uncaught exception included, writes what is held; a SIGKILL loses at most
 * the last HOLD_MS.
 */
export function logDestination(dest: number | string = 1, maxBytes = LOG_BUFFER_MAX_BYTES): HeldDestination {
  // Handed bytes, not a string: SonicBoom measures the UTF-8 length of the whole string it holds
  // on every string write; in buffer mode it keeps each line's bytes and their lengths.
  return new HeldDestination(pino.destination({ dest, sync: false, minLength: HOLD_BYTES, maxLength: maxBytes, contentMode: 'buffer' }), maxBytes);
}

type Sink = ReturnType<typeof pino.destination>;

declare module 'sonic-boom' {
  interface SonicBoom {
    /** With `contentMode: 'buffer'` (logDestination's) it takes bytes: its own types know only strings. */
    write(data: Buffer): boolean;
  }
}

/** What SonicBoom gathers before it writes (it requires less than its `maxWrite`, 16 KiB). */
export const HOLD_BYTES = 15 * 1024;
export const HOLD_MS = 50;
/** The most log bytes held while stdout's reader does not read (about 5 s of access lines at 16k requests a second). */
export const LOG_BUFFER_MAX_BYTES = 32 * 1024 * 1024;

const held = new Set<HeldDestination>();
let exitHooked = false;

export class HeldDestination {
  private timer: NodeJS.Timeout | null = null;
  /** Bytes handed to SonicBoom, and bytes it has written or dropped: the difference is still held. */
  private handed = 0;
  private written = 0;
  /** Bytes dropped since the last write (SonicBoom's `maxLength` reached), for the notice on stderr. */
  private dropped = 0;
  /** Bytes of lines never written since start: dropped at the bound, or handed after stdout closed (sluice_log_bytes_dropped_total). */
  private droppedTotal = 0;
  /** The sink closed, or stdout's reader is gone (EPIPE: pino made the sink's write a no-op): nothing more is written. */
  private closed = false;
  /** Lines waiting for the end of the turn to be built (InfoLine's): built before every flush. */
  private readonly unbuilt = new Set<() => void>();

  constructor(
    readonly sink: Sink,
    maxBytes: number,
  ) {
    held.add(this);
    sink.on('close', () => {
      held.delete(this);
      this.closed = true;
      if (this.timer !== null) clearTimeout(this.timer);
    });
    sink.on('write', (n: number) => {
      this.written += n;
      if (this.dropped > 0) {
        process.stderr.write(`sluice: stdout is read again; ${this.dropped} bytes of log lines were dropped meanwhile\n`);
        this.dropped = 0;
      }
    });
    sink.on('drop', (data: Buffer) => {
      this.written += data.length;
      if (this.dropped === 0) process.stderr.write(`sluice: stdout is not being read and ${maxBytes} bytes of log lines wait: lines are dropped until it is\n`);
      this.dropped += data.length;
      this.droppedTotal += data.length;
    });
    reportWriteErrors(sink, () => {
      this.closed = true;
      // What SonicBoom held will never be written: stdout's reader is gone.
      this.droppedTotal += this.handed - this.written;
    });
    if (!exitHooked) {
      exitHooked = true;
      process.on('exit', () => {
        for (const d of held) d.flushSync();
      });
    }
  }

  /** Has `buildNow` (which writes the lines it holds) run before every flush, so that none is left behind. */
  buildsBeforeFlush(buildNow: () => void): void {
    this.unbuilt.add(buildNow);
  }

  /** Bytes of log lines never written since start (past the bound while stdout was not read, or after it closed). */
  get droppedBytes(): number {
    return this.droppedTotal;
  }

  write(line: string): void {
    if (this.closed) {
      this.droppedTotal += Buffer.byteLength(line);
      return;
    }
    const bytes = Buffer.from(line);
    this.handed += bytes.length;
    this.sink.write(bytes);
    if (this.timer === null) this.timer = setTimeout(this.flushHeld, HOLD_MS).unref();
  }

  /** What SonicBoom holds below `minLength`, written now; again in HOLD_MS while any is unwritten. */
  private readonly flushHeld = (): void => {
    this.timer = null;
    if (this.closed) return;
    try {
      this.sink.flush();
    } catch {
      // Destroyed (it closes its descriptor before it says 'close'): nothing more is written.
      return;
    }
    if (this.written < this.handed) this.timer = setTimeout(this.flushHeld, HOLD_MS).unref();
  };

  /**
   * pino's `logger.flush(cb)`: cb runs once every line written so far is written out, or with the
   * write error that kept some from it (SonicBoom keeps a failed write's lines and tries them
   * again with the next write, or at exit).
   */
  flush(cb?: (err?: Error) => void): void {
    for (const buildNow of this.unbuilt) buildNow();
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    // SonicBoom fsyncs once all is written: a pipe or a terminal cannot be (EINVAL), and a log
    // promises no more than written.
    this.sink.flush((err?: NodeJS.ErrnoException) => {
      if (err !== undefined && err !== null && err.syscall !== 'fsync') return cb?.(err);
      // SonicBoom calls back when the write under way ends, and leaves held what it had gathered
      // below `minLength` meanwhile: that is written too before the flush is done.
      if (this.written < this.handed && !this.closed) return this.flush(cb);
      cb?.();
    });
  }

  /**
   * At exit, when no callback will run again: what SonicBoom holds, written synchronously. A batch
   * SonicBoom is writing at that moment cannot be waited for: it may land after the lines written
   * here, or be lost if the process ends first. The drain on SIGTERM flushes with a callback
   * first, so it never leaves one under way.
   */
  flushSync(): void {
    if (this.closed) return;
    for (const buildNow of this.unbuilt) buildNow();
    try {
      this.sink.flushSync();
    } catch {
      // Not open yet, or closed: there is nowhere to write.
    }
  }
}

/**
 * A log sink is not worth a gateway: without a listener of ours, a write error other than EPIPE
 * would be thrown from an event and end the process (pino's own listener swallows EPIPE, makes
 * the sink's write a no-op from then on, and re-emits any other error, so each arrives here
 * twice). Said once on stderr until a write succeeds again, since SonicBoom tries a failed write's
 * lines again with every later write or flush.
 */
function reportWriteErrors(sink: Sink, onClosed: () => void): void {
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
      onClosed();
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
function escapeLoneSurrogates(line: string): string {
  return (line as string & { isWellFormed(): boolean }).isWellFormed() ? line : line.replace(LONE_SURROGATE, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/**
 * Bumped whenever pino serializes bindings (a logger made, a child, `setBindings`): an own
 * logger's InfoLine keeps its bindings serialized and reads them again only after a change.
 * Counted through `formatters.bindings`, pino's public hook on exactly that event.
 */
let bindingsVersion = 0;
function countBindings(bindings: pino.Bindings): pino.Bindings {
  bindingsVersion++;
  return bindings;
}

/** sluice's logger options: what every line of `createLogger` is written with. */
function loggerOptions(level: string): pino.LoggerOptions {
  return {
    level,
    base: { svc: 'sluice' },
    // A value that is there is censored; an unset one (null) is shown as such: "[redacted]" means set.
    redact: { paths: REDACT_PATHS, censor: (v: unknown) => (v === null || v === undefined ? v : REDACTED) },
    timestamp: isoTimeCached,
    formatters: { bindings: countBindings },
    hooks: { streamWrite: escapeLoneSurrogates },
  };
}

/** Where a logger of createLogger writes: its own held stdout, or a stream a test reads. */
export type LineDestination = HeldDestination | Writable;

/** The loggers createLogger made, with where each writes. */
const destinations = new WeakMap<Logger, LineDestination>();

export function createLogger(level: string, destination: LineDestination = logDestination()): Logger {
  const log = pino(loggerOptions(level), destination);
  destinations.set(log, destination);
  return log;
}

/** Bytes of log lines a logger of createLogger could not write since start; 0 for any other logger. */
export function droppedLogBytes(log: Logger): number {
  const destination = destinations.get(log);
  return destination instanceof HeldDestination ? destination.droppedBytes : 0;
}

/**
 * Writes one info line per item as the logger itself would write `log.info(fieldsOf(item), msg)`:
 * `{"level":30,"time":…` and its bindings first, then the fields serialized by one JSON.stringify,
 * `"msg"` last, onto the same destination, flushed with the others. For a fixed, flat set of
 * fields (strings, numbers, booleans; undefined ones omitted) that the redaction names none of;
 * the caller checks `log.isLevelEnabled('info')` first.
 *
 * Lines are built (`fieldsOf` included) at the end of the event-loop turn, together: built one by
 * one amid their requests' work, each cost four to five times what it costs among the others
 * (docs/performance.md). A line follows any line the logger wrote later in the same turn, and its
 * `time` is when it was built. A flush (the drain's, pino's at exit) builds what is waiting first.
 */
export type InfoLine<T> = (item: T) => void;

/**
 * The InfoLine of a logger createLogger made, whose options are known (loggerOptions); undefined
 * for any other logger (a child, a test's own pino), which writes its lines itself.
 */
export function infoLine<T>(log: Logger, fieldsOf: (item: T) => Readonly<Record<string, unknown>>, msg: string): InfoLine<T> | undefined {
  const destination = destinations.get(log);
  if (destination === undefined) return undefined;
  const end = `"msg":${JSON.stringify(msg)}}\n`;
  let seen = -1;
  let bound = '';
  const turn = new TurnBatch<T>((items) => {
    if (seen !== bindingsVersion) {
      seen = bindingsVersion;
      // `{"svc":"sluice",…}` without its braces: what pino writes after the time. JSON.stringify
      // escapes a lone surrogate as the streamWrite hook does.
      bound = JSON.stringify(log.bindings()).slice(1, -1);
      if (bound !== '') bound = `,${bound}`;
    }
    for (const item of items) {
      const json = JSON.stringify(fieldsOf(item)).slice(1, -1);
      destination.write(`{"level":30${isoTimeCached()}${bound},${json === '' ? '' : `${json},`}${end}`);
    }
  });
  if (destination instanceof HeldDestination) destination.buildsBeforeFlush(turn.flushNow);
  return (item) => turn.add(item);
}
