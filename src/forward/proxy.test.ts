import type http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { useServers } from '../../test/support/servers.js';
import { BodyBudget } from '../http/body-budget.js';
import { Forwarder, type ForwardResult } from './proxy.js';
import { eventually, sleep } from '../../test/support/time.js';

const { listen, onClose } = useServers();

/** A front server that forwards every request with `forwarder`, reporting each result. */
async function front(forwarder: Forwarder, results: ForwardResult[], body?: (req: http.IncomingMessage) => { body: Buffer; budget: BodyBudget } | null): Promise<number> {
  return listen((req, res) => {
    const b = body?.(req) ?? null;
    if (b !== null) req.headers['content-length'] = String(b.body.length);
    forwarder.forward({ req, res, body: b?.body ?? null, lease: b ? leaseOf(b) : null, requestId: 'req-1', done: (r) => results.push(r) });
  });
}

function leaseOf({ body, budget }: { body: Buffer; budget: BodyBudget }): ReturnType<BodyBudget['lease']> {
  const lease = budget.lease('client');
  lease.take(body.length);
  return lease;
}

async function get(port: number, path: string): Promise<{ status: number; text: string; ms: number }> {
  const started = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, text: await r.text(), ms: performance.now() - started };
}

describe("Forwarder: the wait for the relay's headers", () => {
  it("answers 504 upstream_timeout in the relay's shape and aborts the relay request when the headers do not come in time; a call answered in time is untouched", async () => {
    let relayAborted = false;
    const relayPort = await listen((req, res) => {
      if (req.url === '/slow') {
        res.on('close', () => (relayAborted = !res.writableFinished));
        return; // never answers
      }
      res.end('fast');
    });
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`), headersTimeoutSeconds: 1 });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    const port = await front(forwarder, results);

    const fast = await get(port, '/fast');
    expect(fast).toMatchObject({ status: 200, text: 'fast' });
    const slow = await get(port, '/slow');
    expect(slow.status).toBe(504);
    expect(JSON.parse(slow.text)).toEqual({
      error: { code: 'upstream_timeout', message: expect.stringMatching(/within 1 seconds\. \(request id: req-1\)$/) as string, type: 'new_api_error' },
    });
    // Swept once a second: answered after the bound, and long before the relay would have (never).
    expect(slow.ms).toBeGreaterThanOrEqual(990);
    expect(slow.ms).toBeLessThan(5_000);
    await sleep(100);
    expect(relayAborted).toBe(true);
    expect(results.map((r) => r.outcome)).toEqual(['admitted', 'upstream_timeout']);
  });

  it('does not bound anything with a timeout of 0', async () => {
    const relayPort = await listen((_req, res) => setTimeout(() => res.end('late'), 1_300));
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`), headersTimeoutSeconds: 0 });
    onClose(() => forwarder.close());
    const r = await get(await front(forwarder, []), '/x');
    expect(r).toMatchObject({ status: 200, text: 'late' });
  });
});

describe('Forwarder: descriptors', () => {
  it('answers 503 out_of_sockets, naming sluice, when no descriptor is left to open a relay connection (not 502 upstream_unreachable)', async () => {
    const relayPort = await listen((_req, res) => res.end('ok'));
    const seen: Error[] = [];
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`), onOutOfSockets: (err) => seen.push(err) });
    onClose(() => forwarder.close());
    // What a connect gives when the process is out of descriptors.
    (forwarder.agent as unknown as { createConnection: () => net.Socket }).createConnection = () => {
      const s = new net.Socket();
      process.nextTick(() => s.destroy(Object.assign(new Error('connect EMFILE 127.0.0.1'), { code: 'EMFILE', syscall: 'connect' })));
      return s;
    };
    const results: ForwardResult[] = [];
    const r = await get(await front(forwarder, results), '/v1/models');
    expect(r.status).toBe(503);
    const e = (JSON.parse(r.text) as { error: { code: string; message: string } }).error;
    expect(e.code).toBe('out_of_sockets');
    expect(e.message).toContain('sluice is out of sockets');
    expect(results.map((x) => x.outcome)).toEqual(['out_of_sockets']);
    expect(seen.map((x) => (x as NodeJS.ErrnoException).code)).toEqual(['EMFILE']);
  });
});

describe("Forwarder: the body's share of the budget", () => {
  it("is given back once the body is in the relay socket's hands, not when the answer ends", async () => {
    const budget = new BodyBudget(1 << 20);
    let answer: (() => void) | undefined;
    const relayPort = await listen((req, res) => {
      req.resume();
      req.on('end', () => (answer = () => res.end('done')));
    });
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`) });
    onClose(() => forwarder.close());
    const port = await front(forwarder, [], () => ({ body: Buffer.alloc(300_000, 0x61), budget }));
    const pending = get(port, '/v1/responses');
    await eventually(() => expect(answer).toBeDefined(), { timeoutMs: 3_000, intervalMs: 10 });
    // The relay has the whole body and has not answered yet.
    expect(budget.used).toBe(0);
    answer!();
    expect((await pending).text).toBe('done');
  });
});

describe('Forwarder: requests leave at the end of the event-loop turn', () => {
  it("sends nothing to the relay for a client that left before its turn ended, and gives its body's budget back", async () => {
    const budget = new BodyBudget(1 << 20);
    let relayRequests = 0;
    const relayPort = await listen((_req, res) => {
      relayRequests++;
      res.end('ok');
    });
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`) });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    let forwarded = 0;
    const port = await listen((req, res) => {
      const body = Buffer.from('{"model":"gpt-4o-mini"}');
      req.headers['content-length'] = String(body.length);
      const lease = leaseOf({ body, budget });
      forwarder.forward({ req, res, body, lease, requestId: `req-${++forwarded}`, done: (r) => results.push(r) });
      // The first client's connection dies in the same turn its request was forwarded.
      if (forwarded === 1) res.destroy();
    });
    await expect(get(port, '/v1/chat/completions')).rejects.toThrow();
    const second = await get(port, '/v1/chat/completions');
    expect(second).toMatchObject({ status: 200, text: 'ok' });
    await sleep(50);
    expect(relayRequests).toBe(1);
    expect(budget.used).toBe(0);
    expect(results.map((r) => r.outcome)).toEqual(['client_aborted', 'admitted']);
  });

  it('sends every request of a turn, however many are forwarded in it, each answered with its own reply', async () => {
    const seen: string[] = [];
    const relayPort = await listen((req, res) => {
      seen.push(req.url!);
      res.end(req.url);
    });
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`) });
    onClose(() => forwarder.close());
    const port = await front(forwarder, []);
    const paths = Array.from({ length: 20 }, (_, i) => `/v1/models/m${i}`);
    const answers = await Promise.all(paths.map((p) => get(port, p)));
    expect(answers.map((a) => a.text)).toEqual(paths);
    expect(seen).toHaveLength(20);
  });
});
