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

/** A raw client: sends a GET and keeps what comes back; `reading: false` reads nothing once the headers are in. */
function rawGet(port: number, path: string, reading = true): Promise<{ socket: net.Socket; text: () => string; closed: Promise<number> }> {
  return new Promise((resolve) => {
    let text = '';
    const started = performance.now();
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      resolve({ socket, text: () => text, closed });
    });
    const closed = new Promise<number>((done) => socket.on('close', () => done(performance.now() - started)));
    socket.on('error', () => {});
    let paused = reading;
    socket.on('data', (b: Buffer) => {
      text += b.toString('latin1');
      if (!paused && text.includes('\r\n\r\n')) {
        paused = true;
        socket.pause();
      }
    });
  });
}

describe("Forwarder: an answer's silences", () => {
  /** A relay whose `/silent` sends its headers and a first event, then nothing; `/steady` an event every 300 ms for 2.4 s; `/flood` without end. */
  async function relay(): Promise<{ port: number; closedEarly: string[] }> {
    const closedEarly: string[] = [];
    const port = await listen((req, res) => {
      res.on('close', () => {
        if (!res.writableFinished) closedEarly.push(req.url!);
      });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":0}\n\n');
      if (req.url === '/steady') {
        let n = 0;
        const t = setInterval(() => {
          if (++n === 8) {
            clearInterval(t);
            res.end('data: [DONE]\n\n');
          } else res.write(`data: {"n":${n}}\n\n`);
        }, 300);
        res.on('close', () => clearInterval(t));
      } else if (req.url === '/flood') {
        const chunk = Buffer.alloc(64 * 1024, 0x61);
        const more = (): void => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', more);
        };
        more();
      }
    });
    return { port, closedEarly };
  }

  it('cuts an answer whose relay sends nothing for the bound: the client connection and the relay request are closed, outcome answer_stalled, reason relay_silent', async () => {
    const r = await relay();
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${r.port}`), idleTimeoutSeconds: 1 });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    const c = await rawGet(await front(forwarder, results), '/silent');
    const ms = await c.closed;
    // The first event passed at once; the cut came after a second of silence (swept each second).
    expect(c.text()).toMatch(/^HTTP\/1\.1 200 [\s\S]*data: \{"n":0\}/);
    expect(c.text()).not.toContain('0\r\n\r\n');
    expect(ms).toBeGreaterThanOrEqual(990);
    expect(ms).toBeLessThan(4_000);
    await eventually(() => expect(r.closedEarly).toEqual(['/silent']), { timeoutMs: 2_000, intervalMs: 20 });
    expect(results).toMatchObject([{ outcome: 'answer_stalled', status: 200, reason: 'relay_silent' }]);
  });

  it('lets a stream run past the bound while its events come more often than it', async () => {
    const r = await relay();
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${r.port}`), idleTimeoutSeconds: 1 });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    const steady = await get(await front(forwarder, results), '/steady');
    expect(steady.ms).toBeGreaterThan(2_000);
    expect(steady.text).toContain('data: {"n":7}\n\ndata: [DONE]');
    expect(results.map((x) => x.outcome)).toEqual(['admitted']);
  });

  it('cuts an answer its client stops reading, reason client_not_reading, and stops reading the relay', async () => {
    const r = await relay();
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${r.port}`), idleTimeoutSeconds: 1 });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    const c = await rawGet(await front(forwarder, results), '/flood', false);
    await eventually(() => expect(results).toMatchObject([{ outcome: 'answer_stalled', status: 200, reason: 'client_not_reading' }]), { timeoutMs: 4_000, intervalMs: 20 });
    await eventually(() => expect(r.closedEarly).toEqual(['/flood']), { timeoutMs: 2_000, intervalMs: 20 });
    // Reading again, the client finds its connection closed, its answer unfinished.
    c.socket.resume();
    await c.closed;
  });

  it('bounds nothing once the bound is set to 0, as a reload does', async () => {
    const r = await relay();
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${r.port}`), idleTimeoutSeconds: 1 });
    onClose(() => forwarder.close());
    forwarder.setIdleTimeout(0);
    const results: ForwardResult[] = [];
    const c = await rawGet(await front(forwarder, results), '/silent');
    await sleep(2_500);
    expect(c.socket.destroyed).toBe(false);
    expect(results).toEqual([]);
    c.socket.destroy();
    await eventually(() => expect(results.map((x) => x.outcome)).toEqual(['client_aborted']), { timeoutMs: 2_000, intervalMs: 20 });
  });
});

describe('Forwarder: a relay answer writeHead refuses', () => {
  it("answers 502 without any of the relay's fields or its reason phrase writeHead took before it threw, keeping the drain's connection: close", async () => {
    const relayPort = await listen((_req, res) => {
      res.writeHead(200, 'Relay Phrase', { 'x-first': 'relay', 'x-refused': 'relay', 'content-type': 'application/json' });
      res.end('{}');
    });
    const forwarder = new Forwarder({ upstream: new URL(`http://127.0.0.1:${relayPort}`) });
    onClose(() => forwarder.close());
    const results: ForwardResult[] = [];
    const port = await listen((req, res) => {
      // As a drain sets it; and a field writeHead refuses, after it took the ones before.
      res.setHeader('connection', 'close');
      // (Node 20's writeHead takes them with setHeader, later Nodes' with appendHeader.)
      const set = res.setHeader.bind(res);
      const append = res.appendHeader.bind(res);
      const refuse = (name: string): void => {
        if (name.toLowerCase() === 'x-refused') throw new TypeError('Invalid character in header content ["x-refused"]');
      };
      res.setHeader = (name, value) => (refuse(name), set(name, value));
      res.appendHeader = (name, value) => (refuse(name), append(name, value));
      forwarder.forward({ req, res, body: null, requestId: 'req-1', done: (r) => results.push(r) });
    });
    const r = await fetch(`http://127.0.0.1:${port}/v1/models`);
    expect(r.status).toBe(502);
    expect(r.statusText).toBe('Bad Gateway');
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('upstream_unreachable');
    expect(r.headers.get('x-first')).toBeNull();
    expect(r.headers.get('connection')).toBe('close');
    expect(results).toMatchObject([{ outcome: 'upstream_error', status: 502 }]);
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
