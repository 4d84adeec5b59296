/**
 * Server-sent-event measurements over raw sockets: time to the first event, and many streams held
 * open at once.
 */
import net from 'node:net';

export interface StreamRequest {
  port: number;
  /** `x-bench-mode` for the relay stand-in (bench/servers/relay.ts). */
  mode: 'ttfe' | 'hold';
  key?: string;
  model?: string;
}

function requestBytes(r: StreamRequest, keepAlive: boolean): Buffer {
  const body = JSON.stringify({ model: r.model ?? 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  return Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${r.port}\r\ncontent-type: application/json\r\n` +
      `x-bench-mode: ${r.mode}\r\n${r.key ? `authorization: Bearer ${r.key}\r\n` : ''}` +
      `${keepAlive ? '' : 'connection: close\r\n'}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

const DATA = Buffer.from('data:');
/** Set by the relay stand-in in `ttfe` mode: its `process.hrtime.bigint()` as it wrote the first
 * event. CLOCK_MONOTONIC is shared by every process on the host, so the client can subtract it. */
export const SENT_AT_HEADER = 'x-bench-sent-ns';
const SENT_AT_RE = new RegExp(`\r\n${SENT_AT_HEADER}: *(\\d+)\r\n`, 'i');

export interface StreamTiming {
  /** Request written → first `data:` byte received, ms. */
  firstEventMs: number;
  /** The relay wrote the first event → its `data:` byte received here, ms (NaN without the
   * relay's stamp): the way back alone, free of the request's way in and the relay's timer. */
  backMs: number;
  /** Request written → end of the stream, ms. */
  totalMs: number;
  events: number;
  status: number;
}

/** One stream on a fresh connection (`connection: close`), timed. Bounded by `timeoutMs`. */
export function timeStream(r: StreamRequest, timeoutMs = 5000): Promise<StreamTiming> {
  return new Promise((resolve, reject) => {
    const s = net.connect(r.port, '127.0.0.1');
    s.setNoDelay(true);
    let buf = Buffer.alloc(0);
    let t0 = 0;
    let first = 0;
    let firstNs = 0n;
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('stream timed out'));
    }, timeoutMs);
    s.once('connect', () => {
      t0 = performance.now();
      s.write(requestBytes(r, false));
    });
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (first === 0) {
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd !== -1 && buf.indexOf(DATA, headEnd) !== -1) {
          firstNs = process.hrtime.bigint();
          first = performance.now();
        }
      }
    });
    s.on('error', () => {});
    s.once('close', () => {
      clearTimeout(timer);
      const end = performance.now();
      const text = buf.toString('latin1');
      const events = text.split('data:').length - 1;
      const sent = SENT_AT_RE.exec(text.slice(0, text.indexOf('\r\n\r\n') + 2));
      const backMs = sent && firstNs ? Number(firstNs - BigInt(sent[1]!)) / 1e6 : NaN;
      resolve({ firstEventMs: first ? first - t0 : NaN, backMs, totalMs: end - t0, events, status: Number(text.slice(9, 12)) });
    });
  });
}

export interface HeldStreams {
  opened: number;
  failed: number;
  /** Time to open all streams and see each one's first event, ms. */
  openMs: number;
  close(): void;
}

/**
 * Opens `count` streams (in batches) and waits until each has delivered its first event; the
 * relay then keeps them open and silent. Bounded by `timeoutMs`.
 */
export async function holdStreams(r: StreamRequest, count: number, batch = 250, timeoutMs = 60_000): Promise<HeldStreams> {
  const sockets: net.Socket[] = [];
  let failed = 0;
  const t0 = performance.now();
  const deadline = t0 + timeoutMs;
  const req = requestBytes(r, true);
  const openOne = (): Promise<void> =>
    new Promise((resolve) => {
      const s = net.connect(r.port, '127.0.0.1');
      sockets.push(s);
      let buf = Buffer.alloc(0);
      let done = false;
      const finish = (ok: boolean): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (!ok) failed++;
        resolve();
      };
      const timer = setTimeout(() => finish(false), Math.max(1000, deadline - performance.now()));
      s.once('connect', () => s.write(req));
      s.on('data', (c: Buffer) => {
        if (done) return;
        buf = Buffer.concat([buf, c]);
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd !== -1) {
          if (!buf.subarray(9, 12).equals(Buffer.from('200'))) finish(false);
          else if (buf.indexOf(DATA, headEnd) !== -1) {
            buf = Buffer.alloc(0);
            finish(true);
          }
        }
      });
      s.on('error', () => finish(false));
      s.on('close', () => finish(false));
    });
  for (let i = 0; i < count && performance.now() < deadline; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, openOne));
  }
  return {
    opened: sockets.length - failed,
    failed: failed + (count - sockets.length),
    openMs: performance.now() - t0,
    close() {
      for (const s of sockets) s.destroy();
    },
  };
}
