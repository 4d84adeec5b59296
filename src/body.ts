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
 * From this declared length on, the body is copied into one buffer as it arrives: joining 20 MB
 * of chunks at the end would hold the event loop for about 10 ms.
 */
const PREALLOCATE_FROM = 256 * 1024;

/** A declared body, even an empty one, is read and re-sent with its exact length. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

export function readBody(req: IncomingMessage, maxBytes: number, observer?: ChunkObserver | null): Promise<BodyResult> {
  const declared = req.headers['content-length'];
  const expected = declared === undefined ? -1 : Number(declared);
  if (expected > maxBytes) return Promise.resolve({ ok: false, reason: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Not zeroed: handed out only once every byte of it has been written.
    let whole = expected >= PREALLOCATE_FROM ? Buffer.allocUnsafe(expected) : null;
    let done = false;
    // The resolving function keeps its promise, and so the result, reachable: dropped once used.
    let settle: ((r: BodyResult) => void) | null = resolve;
    // The listeners stay (four removals per request cost more than four closures that ignore
    // what comes after), so nothing they hold may outlive the read.
    const finish = (r: BodyResult): void => {
      if (done) return;
      done = true;
      settle!(r);
      settle = null;
    };
    const onData = (c: Buffer): void => {
      if (done) return;
      size += c.length;
      if (size > maxBytes) {
        // Stop buffering; the caller answers 413 and closes the connection.
        chunks.length = 0;
        whole = null;
        req.pause();
        finish({ ok: false, reason: 'too-large' });
        return;
      }
      if (whole === null) chunks.push(c);
      else if (size <= whole.length) c.copy(whole, size - c.length);
      else {
        // More than declared (Node's parser does not let that happen): fall back to chunks.
        chunks.push(whole.subarray(0, size - c.length), c);
        whole = null;
      }
      observer?.feed(c);
    };
    const onEnd = (): void => {
      // (Only the bytes written are handed out, should fewer than declared ever end a body.)
      const body = whole !== null ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      whole = null;
      // These closures stay on the request for as long as it lives (a stream, minutes): they must
      // not keep the body alive once the forwarder has sent it.
      chunks.length = 0;
      finish({ ok: true, body });
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
