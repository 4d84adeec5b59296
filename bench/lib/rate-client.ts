/**
 * Open-loop load at a fixed rate (wrk2 is not packaged; autocannon's rate limiting sends in
 * bursts once per second). Runs as its own process (compiled: `node bench/.build/bench/lib/rate-client.js '<json>'`).
 *
 * Request i is due at t0 + i/rate; it goes out on an idle keep-alive connection, or waits for
 * one. Latency is counted from when it was due, not from when it was sent, so a server that
 * falls behind is charged for the queue it causes (no coordinated omission). Timers tick about
 * once a millisecond, so requests leave in small batches; that bias is the same for every
 * variant measured this way. Prints one JSON line with percentiles in ms.
 */
import net from 'node:net';

interface Args {
  host: string;
  port: number;
  path: string;
  method: string;
  headers: Record<string, string>;
  /** API keys, used in turn as `authorization: Bearer <key>`. */
  keys: string[];
  body: string;
  rate: number;
  seconds: number;
  connections: number;
}

const a = JSON.parse(process.argv[2] ?? '{}') as Args;
const body = Buffer.from(a.body);
const requests = (a.keys.length ? a.keys : ['']).map((key) => {
  const headers: Record<string, string> = { ...a.headers, 'content-length': String(body.length) };
  if (key) headers.authorization = `Bearer ${key}`;
  const head =
    `${a.method} ${a.path} HTTP/1.1\r\nHost: ${a.host}:${a.port}\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
});
let nextRequest = 0;

const total = Math.round(a.rate * a.seconds);
const latencies = new Float64Array(total);
let recorded = 0;
let non2xx = 0;
let errors = 0;
let next = 0; // index of the next request to schedule
const backlog: number[] = []; // due times of requests waiting for a connection
const interval = 1000 / a.rate;

interface Conn {
  socket: net.Socket;
  busy: boolean;
  due: number;
  buf: Buffer;
}

const idle: Conn[] = [];
const conns: Conn[] = [];
let t0 = 0;

function send(c: Conn, due: number): void {
  c.busy = true;
  c.due = due;
  c.socket.write(requests[nextRequest]!);
  nextRequest = (nextRequest + 1) % requests.length;
}

function release(c: Conn): void {
  c.busy = false;
  const due = backlog.shift();
  if (due !== undefined) send(c, due);
  else idle.push(c);
}

/** Returns the length of one complete response at the start of buf, or 0 if incomplete. */
function responseLength(buf: Buffer): { len: number; status: number } {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return { len: 0, status: 0 };
  const headText = buf.toString('latin1', 0, end);
  const status = Number(headText.slice(9, 12));
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(headText);
  if (cl) {
    const len = end + 4 + Number(cl[1]);
    return { len: buf.length >= len ? len : 0, status };
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(headText)) {
    const term = buf.indexOf('\r\n0\r\n\r\n', end);
    return { len: term === -1 ? 0 : term + 7, status };
  }
  return { len: end + 4, status };
}

function connect(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(a.port, a.host);
    socket.setNoDelay(true);
    const c: Conn = { socket, busy: false, due: 0, buf: Buffer.alloc(0) };
    socket.once('connect', () => {
      conns.push(c);
      idle.push(c);
      resolve();
    });
    socket.on('data', (chunk: Buffer) => {
      c.buf = c.buf.length === 0 ? chunk : Buffer.concat([c.buf, chunk]);
      const r = responseLength(c.buf);
      if (r.len === 0) return;
      const now = performance.now();
      c.buf = c.buf.subarray(r.len);
      if (recorded < total) latencies[recorded++] = now - c.due;
      if (r.status < 200 || r.status >= 400) non2xx++;
      release(c);
    });
    socket.on('error', (e) => {
      errors++;
      reject(e);
    });
  });
}

function tick(): void {
  const now = performance.now();
  while (next < total && t0 + next * interval <= now) {
    const due = t0 + next * interval;
    next++;
    const c = idle.pop();
    if (c) send(c, due);
    else backlog.push(due);
  }
  if (next < total) setTimeout(tick, 1);
}

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

await Promise.all(Array.from({ length: a.connections }, () => connect()));
t0 = performance.now();
tick();
const deadline = t0 + a.seconds * 1000 + 5000;
await new Promise<void>((resolve) => {
  const check = setInterval(() => {
    if (recorded >= total || performance.now() > deadline) {
      clearInterval(check);
      resolve();
    }
  }, 20);
});
const elapsed = (performance.now() - t0) / 1000;
const sorted = latencies.slice(0, recorded).sort();
for (const c of conns) c.socket.destroy();
process.stdout.write(
  JSON.stringify({
    sent: next,
    completed: recorded,
    seconds: elapsed,
    rps: recorded / elapsed,
    non2xx,
    errors: errors + (total - recorded),
    p50: pct(sorted, 50),
    p90: pct(sorted, 90),
    p99: pct(sorted, 99),
    p999: pct(sorted, 99.9),
    max: sorted[sorted.length - 1] ?? 0,
  }) + '\n',
);
process.exit(0);
