/**
 * Reads a request body into memory, bounded by `maxBodyBytes`: sluice must see
 * the `model` before the relay does, and a body it has read is re-sent
 * byte for byte.
 */
import type { IncomingMessage } from 'node:http';
import type { BodyLease } from './body-budget.js';
import type { Outcome } from '../answers/outcome.js';

/** Why a body was not read, in the request path's own vocabulary (src/answers/outcome.ts). */
export type BodyRefusal = Extract<Outcome, 'too_large' | 'busy' | 'client_aborted'>;

export type BodyResult =
  | { ok: true; body: Buffer }
  /**
   * too_large: past `maxBytes`. busy: the bytes would take the bodies in flight past their budget
   * (src/http/body-budget.ts). client_aborted: the client went away or sent a broken body; there is
   * nobody to answer.
   */
  | { ok: false; reason: BodyRefusal };

/** Sees each chunk of a body as it arrives (the model prepass). */
export interface ChunkObserver {
  feed(chunk: Buffer): void;
}

/**
 * From this declared length on, the body is moved into one buffer of that length as it arrives:
 * joining many megabytes of chunks at the end would hold the event loop for the whole copy.
 */
const PREALLOCATE_FROM = 256 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * Collects a body's chunks. A large declared body gets one buffer of its declared length once half
 * of it has actually arrived, so a client cannot make sluice reserve memory by declaring a length
 * it never sends; the chunks that came before are copied over two at a time as later ones arrive,
 * so neither that move nor a join at the end holds the event loop for long.
 *
 * With a lease, the body's bytes are counted: each chunk as it arrives, then the rest of the one
 * buffer when it is allocated. The chunks moved into it are garbage from then on, as a joined
 * body's chunks would be (docs/operations.md, Memory: buffers freed but not yet collected).
 */
export class Accumulator {
  size = 0;
  private chunks: Buffer[] = [];
  /** Not zeroed: handed out only once every byte of it has been written. */
  private whole: Buffer | null = null;
  /** Chunks before `next` are in `whole` already, filling its first `filled` bytes. */
  private next = 0;
  private filled = 0;

  constructor(
    private readonly expected: number,
    private readonly lease: BodyLease | null = null,
  ) {}

  /** Keeps `c`; false (and nothing kept) when the lease cannot take the memory it needs. */
  add(c: Buffer): boolean {
    const at = this.size;
    if (this.whole !== null) {
      if (at + c.length <= this.whole.length) {
        this.size += c.length;
        c.copy(this.whole, at);
        this.moveEarlier(2);
        return true;
      }
      // More than declared (Node's parser does not let that happen): back to plain chunks.
      this.moveEarlier(Infinity);
      this.chunks = [this.whole.subarray(0, at)];
      this.whole = null;
    }
    if (this.lease !== null && !this.lease.take(c.length)) return false;
    this.size += c.length;
    this.chunks.push(c);
    if (this.expected >= PREALLOCATE_FROM && this.size * 2 >= this.expected && this.size <= this.expected && this.chunks.length > 1) {
      // The chunks so far are counted already: they move over as later ones arrive. Counted twice
      // meanwhile, a body over two thirds of an address's share could never be read.
      if (this.lease !== null && !this.lease.take(this.expected - this.size)) return false;
      this.whole = Buffer.allocUnsafe(this.expected);
      this.next = 0;
      this.filled = 0;
    }
    return true;
  }

  /** The body as received; the accumulator lets go of it. */
  take(): Buffer {
    let body: Buffer;
    if (this.whole !== null) {
      this.moveEarlier(Infinity);
      body = this.whole.subarray(0, this.size);
    } else {
      body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    }
    this.release();
    return body;
  }

  release(): void {
    this.chunks = [];
    this.whole = null;
  }

  private moveEarlier(n: number): void {
    const whole = this.whole!;
    for (let k = 0; k < n && this.next < this.chunks.length; k++) {
      const c = this.chunks[this.next]!;
      c.copy(whole, this.filled);
      this.filled += c.length;
      this.chunks[this.next++] = EMPTY;
    }
  }
}

/**
 * Reads and drops the rest of a body sluice refused part-way (or before reading it), at most
 * `maxBytes` more, so that the client, still uploading, reads the answer: closing a socket with
 * unread bytes in it makes the kernel answer RST, which can discard the answer unread. Past
 * `maxBytes` (a body of unknown length that goes on), or when the rest is not in within `withinMs`
 * (if given), the connection is closed. The same for a relay answer sluice replaced: read to its
 * end, its connection serves again.
 */
export function dropRest(req: IncomingMessage, maxBytes: number, withinMs?: number): void {
  let dropped = 0;
  req.on('data', (c: Buffer) => {
    dropped += c.length;
    if (dropped > maxBytes) req.destroy();
  });
  if (withinMs !== undefined) {
    const timer = setTimeout(() => req.socket.destroy(), withinMs).unref();
    const stop = (): void => clearTimeout(timer);
    req.once('end', stop);
    req.once('close', stop);
  }
  req.resume();
}

/** A declared body, even an empty one, is read and re-sent with its exact length. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

/** Whether the request's framing announces body bytes: a length other than 0, or chunked. */
export function announcesBytes(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
}

/** The declared body length, or -1 when none is declared (chunked). */
export function declaredLength(req: IncomingMessage): number {
  const declared = req.headers['content-length'];
  return declared === undefined ? -1 : Number(declared);
}

/**
 * Reads the body, at most `maxBytes`. With a lease, every byte held counts against the bodies'
 * budget: a declared length the budget cannot spare now is refused before anything is read, and
 * a chunk the budget cannot take ends the read ('busy').
 */
export function readBody(req: IncomingMessage, maxBytes: number, observer?: ChunkObserver | null, lease?: BodyLease | null): Promise<BodyResult> {
  const expected = declaredLength(req);
  if (expected > maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  if (lease && expected > 0 && !lease.fits(expected)) return Promise.resolve({ ok: false, reason: 'busy' });
  // Gone while an earlier step awaited: its 'close' has passed, so no listener below would ever hear it.
  if (req.destroyed && !req.complete) return Promise.resolve({ ok: false, reason: 'client_aborted' });
  return new Promise((resolve) => {
    const acc = new Accumulator(expected, lease ?? null);
    let finished = false;
    // The read's listeners go once it is over: a request lives as long as its stream, minutes, and
    // what they hold (the body's chunks, the observer) must not live that long with it.
    const finish = (r: BodyResult): void => {
      if (finished) return;
      finished = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      acc.release();
      resolve(r);
    };
    const onData = (c: Buffer): void => {
      if (acc.size + c.length > maxBytes) {
        // Stop buffering; the caller answers 413 and closes the connection.
        req.pause();
        finish({ ok: false, reason: 'too_large' });
        return;
      }
      if (!acc.add(c)) {
        req.pause();
        finish({ ok: false, reason: 'busy' });
        return;
      }
      observer?.feed(c);
    };
    const onEnd = (): void => finish({ ok: true, body: acc.take() });
    const onError = (): void => finish({ ok: false, reason: 'client_aborted' });
    const onClose = (): void => {
      if (!req.complete) finish({ ok: false, reason: 'client_aborted' });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
