/**
 * Reads a request body into memory, bounded by `maxBodyBytes`: sluice must see
 * the `model` before the relay does, and a body it has read is re-sent
 * byte for byte.
 */
import type { IncomingMessage } from 'node:http';

export type BodyResult =
  | { ok: true; body: Buffer }
  | { ok: false; reason: 'too-large' }
  /** The client went away or sent a broken body; there is nobody to answer. */
  | { ok: false; reason: 'aborted' };

/** Sees each chunk of a body as it arrives (the model prepass). */
export interface ChunkObserver {
  feed(chunk: Buffer): void;
}

/**
 * From this declared length on, the body is moved into one buffer of that length as it arrives:
 * joining 20 MB of chunks at the end would hold the event loop for about 10 ms.
 */
const PREALLOCATE_FROM = 256 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * Collects a body's chunks. A large declared body gets one buffer of its declared length once half
 * of it has actually arrived, so a client cannot make sluice reserve memory by declaring a length
 * it never sends; the chunks that came before are copied over two at a time as later ones arrive,
 * so neither that move nor a join at the end holds the event loop for long.
 */
export class Accumulator {
  size = 0;
  private chunks: Buffer[] = [];
  /** Not zeroed: handed out only once every byte of it has been written. */
  private whole: Buffer | null = null;
  /** Chunks before `next` are in `whole` already, filling its first `filled` bytes. */
  private next = 0;
  private filled = 0;

  constructor(private readonly expected: number) {}

  add(c: Buffer): void {
    const at = this.size;
    this.size += c.length;
    if (this.whole !== null) {
      if (this.size <= this.whole.length) {
        c.copy(this.whole, at);
        this.moveEarlier(2);
        return;
      }
      // More than declared (Node's parser does not let that happen): back to plain chunks.
      this.moveEarlier(Infinity);
      this.chunks = [this.whole.subarray(0, at)];
      this.whole = null;
    }
    this.chunks.push(c);
    if (this.expected >= PREALLOCATE_FROM && this.size * 2 >= this.expected && this.size <= this.expected && this.chunks.length > 1) {
      this.whole = Buffer.allocUnsafe(this.expected);
      this.next = 0;
      this.filled = 0;
    }
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

/** A declared body, even an empty one, is read and re-sent with its exact length. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

export function readBody(req: IncomingMessage, maxBytes: number, observer?: ChunkObserver | null): Promise<BodyResult> {
  const declared = req.headers['content-length'];
  const expected = declared === undefined ? -1 : Number(declared);
  if (expected > maxBytes) return Promise.resolve({ ok: false, reason: 'too-large' });
  // Gone while an earlier step awaited: its 'close' has passed, so no listener below would ever hear it.
  if (req.destroyed && !req.complete) return Promise.resolve({ ok: false, reason: 'aborted' });
  // Outside the closures below, so that `observer` itself is not kept by them.
  let feed = observer ?? null;
  return new Promise((resolve) => {
    let acc: Accumulator | null = new Accumulator(expected);
    // The resolving function keeps its promise, and so the result, reachable.
    let settle: ((r: BodyResult) => void) | null = resolve;
    // The listeners stay on the request (four removals per request cost more than four closures
    // that ignore what comes after), and a request lives as long as its stream, minutes: so they
    // let go of everything they hold once the read is over.
    const finish = (r: BodyResult): void => {
      if (settle === null) return;
      const s = settle;
      settle = null;
      acc?.release();
      acc = null;
      feed = null;
      s(r);
    };
    const onData = (c: Buffer): void => {
      if (acc === null) return;
      if (acc.size + c.length > maxBytes) {
        // Stop buffering; the caller answers 413 and closes the connection.
        req.pause();
        finish({ ok: false, reason: 'too-large' });
        return;
      }
      acc.add(c);
      feed?.feed(c);
    };
    const onEnd = (): void => {
      if (acc !== null) finish({ ok: true, body: acc.take() });
    };
    const onError = (): void => finish({ ok: false, reason: 'aborted' });
    const onClose = (): void => {
      if (!req.complete) finish({ ok: false, reason: 'aborted' });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
