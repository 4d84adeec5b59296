/**
 * A key flood from one loopback address, in a process of its own (so that the test process, which
 * times the legitimate clients, is not also busy sending it): `connections` keep-alive connections
 * from `from` (any 127.0.0.0/8 address is this machine's), each sending its next request as soon
 * as the last is answered, for `durationMs`. Keys: random ones of the relay console's shape, or
 * one key with a random `-<suffix>` each time. `runFlood` starts it and resolves with what came
 * back; run directly (`node --import tsx flood.ts '<json>'`) it prints that as JSON.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';

export interface FloodOptions {
  port: number;
  /** The source address (127.x.y.z). */
  from: string;
  connections: number;
  durationMs: number;
  /** `random`: a fresh random key each request; otherwise this key with a random `-<suffix>`. */
  keys: 'random' | { suffixed: string };
  path?: string;
}

export interface FloodResult {
  sent: number;
  /** Answers by status ("0": a connection error or no answer). */
  statuses: Record<string, number>;
  /** Answers with status 503 that carried Retry-After, and 401s that carried the contract's body. */
  retryAfter503: number;
  contract401: number;
  /** The slowest answer, ms. */
  maxMs: number;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomAlnum(n: number): string {
  let s = '';
  for (const b of randomBytes(n)) s += ALNUM[b % ALNUM.length];
  return s;
}

async function flood(o: FloodOptions): Promise<FloodResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections, localAddress: o.from });
  const result: FloodResult = { sent: 0, statuses: {}, retryAfter503: 0, contract401: 0, maxMs: 0 };
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  const end = performance.now() + o.durationMs;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const key = o.keys === 'random' ? `sk-${randomAlnum(48)}` : `${o.keys.suffixed}-${randomAlnum(12)}`;
      const start = performance.now();
      result.sent++;
      const done = (status: number, headers: http.IncomingHttpHeaders, text: string): void => {
        result.maxMs = Math.max(result.maxMs, performance.now() - start);
        result.statuses[status] = (result.statuses[status] ?? 0) + 1;
        if (status === 503 && headers['retry-after'] !== undefined) result.retryAfter503++;
        if (status === 401 && /^\{"error":\{"code":"","message":".*\(request id: \w+\)","type":"new_api_error"\}\}$/.test(text)) result.contract401++;
        resolve();
      };
      const req = http.request(
        {
          host: '127.0.0.1',
          port: o.port,
          method: 'POST',
          path: o.path ?? '/v1/chat/completions',
          agent,
          timeout: 10_000,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => done(res.statusCode ?? 0, res.headers, text));
          res.on('error', () => done(0, {}, ''));
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
      req.on('error', () => done(0, {}, ''));
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: o.connections }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  agent.destroy();
  return result;
}

/** Runs the flood in its own process; resolves when it has ended. */
export function runFlood(o: FloodOptions): Promise<FloodResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, JSON.stringify(o)], {
      cwd: new URL('../..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (err = (err + b.toString('utf8')).slice(-4000)));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`the flood process exited ${code}: ${err}`));
      resolve(JSON.parse(out) as FloodResult);
    });
  });
}

if (process.argv[1] === new URL(import.meta.url).pathname && process.argv[2] !== undefined) {
  void flood(JSON.parse(process.argv[2]) as FloodOptions).then((r) => process.stdout.write(JSON.stringify(r)));
}
