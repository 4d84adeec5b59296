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

/** A declared body, even an empty one, is read and re-sent with its exact length. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.resolve({ ok: false, reason: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
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
        req.pause();
        finish({ ok: false, reason: 'too-large' });
        return;
      }
      chunks.push(c);
    };
    const onEnd = (): void => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
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
