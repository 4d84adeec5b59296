import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, STORE_KINDS, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { sleep } from '../support/time.js';

/** Sends raw bytes on a socket and collects whatever comes back until close. */
function rawExchange(port: number, data: string | Buffer, waitMs = 500): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (c) => (out += c.toString('latin1')));
    s.on('error', () => {});
    s.on('close', () => resolve(out));
    s.write(data);
    setTimeout(() => s.destroy(), waitMs);
  });
}

describe.each(STORE_KINDS)('forwarding on the %s store', (kind) => {
  let h: Harness;
  let key: string;
  let port: number;

  beforeAll(async () => {
    h = await startHarness({ store: kind, file: { maxBodyBytes: 12 * 1024 * 1024 } });
    key = (await h.createKey('fwd')).key;
    port = Number(new URL(h.url).port);
  });
  afterAll(() => h.close());
  afterEach(() => h.relay.reset());

  const auth = () => ({ authorization: `Bearer ${key}` });

  it('passes a 10 MB binary body to the relay and back byte for byte', async () => {
    const body = randomBytes(10 * 1024 * 1024);
    // Not a JSON object: random bytes open with "{" (after optional whitespace) about once in 250
    // runs, and a body that opens like an object but is not valid JSON is a 400, by design.
    body[0] = 0;
    h.relay.behave(() => true, { echo: true });
    const r = await request(h.url, 'POST', '/v1/files', { headers: { ...auth(), 'content-type': 'application/octet-stream' }, body });
    expect(r.status).toBe(200);
    expect(r.body.equals(body)).toBe(true);
    expect(h.relay.requests[0]!.body.equals(body)).toBe(true);
    expect(h.relay.requests[0]!.headers['content-length']).toBe(String(body.length));
  });

  it('passes a chunked upload unchanged, and JSON bytes exactly as sent (whitespace, key order, escapes)', async () => {
    const text = '{ "messages" : [ {"role":"user","content":"h\\u00e9llo \\"q\\""} ],\n\t"model":"gpt-4o" , "z":1.50e+3 }';
    h.relay.behave(() => true, { echo: true });
    const got = await new Promise<Buffer>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...auth(), 'content-type': 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks)));
      });
      req.on('error', reject);
      req.write(text.slice(0, 10));
      setTimeout(() => req.end(text.slice(10)), 50);
    });
    expect(got.toString()).toBe(text);
    expect(h.relay.requests[0]!.body.toString()).toBe(text);
    expect(h.relay.requests[0]!.headers['transfer-encoding']).toBeUndefined();
  });

  it('reads the model of a large JSON body as it arrives and forwards it byte for byte, with or without a declared length', async () => {
    const { key: bigKey } = await h.createKey('big-body');
    const messages = Array.from({ length: 30_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} with a "quote" and {brackets} [${i}]` }));
    const text = JSON.stringify({ messages, temperature: 0.2, model: 'vend-flash-free' });
    expect(text.length).toBeGreaterThan(2_000_000);
    const body = Buffer.from(text);
    h.relay.behave(() => true, { echo: true });
    const headers = { authorization: `Bearer ${bigKey}`, 'content-type': 'application/json' };

    const declared = await request(h.url, 'POST', '/v1/chat/completions', { headers, body });
    expect(declared.status).toBe(200);
    expect(declared.headers['ratelimit']).toMatch(/"free-window";r=19;/); // counted as a free call
    expect(h.relay.requests[0]!.body.equals(body)).toBe(true);
    expect(h.relay.requests[0]!.headers['content-length']).toBe(String(body.length));

    const chunked = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res));
      });
      req.on('error', reject);
      for (let i = 0; i < body.length; i += 100_003) req.write(body.subarray(i, i + 100_003));
      req.end();
    });
    expect(chunked.statusCode).toBe(200);
    expect(chunked.headers['ratelimit']).toMatch(/"free-window";r=18;/);
    expect(h.relay.requests[1]!.body.equals(body)).toBe(true);

    // A second, disagreeing top-level model at the far end is still refused.
    const twoModels = Buffer.from(text.slice(0, -1) + ',"MODEL":"gpt-4o"}');
    const refused = await request(h.url, 'POST', '/v1/chat/completions', { headers, body: twoModels });
    expect(refused.status).toBe(400);
    expect(h.relay.started).toBe(2);

    // Compressed, it is decoded off the event loop and read the same way; the relay gets the bytes as sent.
    const gz = gzipSync(body);
    const compressed = await request(h.url, 'POST', '/v1/chat/completions', { headers: { ...headers, 'content-encoding': 'gzip' }, body: gz });
    expect(compressed.status).toBe(200);
    expect(compressed.headers['ratelimit']).toMatch(/"free-window";r=17;/);
    expect(h.relay.requests[2]!.body.equals(gz)).toBe(true);
    expect(h.relay.requests[2]!.headers['content-encoding']).toBe('gzip');

    // A small body that inflates past maxBodyBytes is refused, not inflated.
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const tooBig = await request(h.url, 'POST', '/v1/chat/completions', { headers: { ...headers, 'content-encoding': 'gzip' }, body: bomb });
    expect(tooBig.status).toBe(413);
    expect(JSON.parse(tooBig.text).error.code).toBe('request_body_too_large');
    expect(h.relay.started).toBe(3);
  });

  it('neither forwards nor counts a compressed call whose client left while its body was being decoded', async () => {
    const { key: leaverKey } = await h.createKey('left-during-decode');
    const text = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(11 * 1024 * 1024) }], model: 'vend-flash-free' });
    const gz = gzipSync(text);
    const headers = { authorization: `Bearer ${leaverKey}`, 'content-type': 'application/json', 'content-encoding': 'gzip' };
    await new Promise<void>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...headers, 'content-length': String(gz.length) } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      // Leave as soon as the last byte is written: sluice is then still inflating 11 MB.
      req.end(gz, () => req.destroy());
    });
    await sleep(500);
    expect(h.relay.started).toBe(0);
    const next = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${leaverKey}` }, body: JSON.stringify({ model: 'vend-flash-free' }) });
    expect(next.status).toBe(200);
    expect(next.headers['ratelimit']).toMatch(/"free-window";r=19;/); // the departed call did not count
  });

  it('answers a rejected request before its body and closes, instead of reading an unbounded body', async () => {
    // A wrong key on a POST declaring 1 GB: the 401 comes at once and the server hangs up.
    const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\nContent-Length: 1000000000\r\n\r\n{"model":';
    const started = Date.now();
    const answer = await rawExchange(port, head, 3000);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(Date.now() - started).toBeLessThan(2500); // closed by the server, not by our 3 s give-up
    // A rejected request without a body keeps its connection.
    const get = await rawExchange(port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\n\r\n', 300);
    expect(get).toMatch(/^HTTP\/1\.1 401 /);
    expect(get).not.toMatch(/\r\nconnection: close\r\n/i);
  });

  it('keeps the connection of a keep-alive client refused before its small body: the body is dropped and the next request on the connection is answered', async () => {
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
    const post = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const get = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\n\r\n';
    // Both requests in one write, the second right behind the first's body.
    const answer = await rawExchange(port, post + get, 1000);
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['401', '401']);
    expect(answer).not.toMatch(/\r\nconnection: close\r\n/i);
    expect(h.relay.started).toBe(0);
  });

  it('keeps an explicitly empty POST body as content-length: 0', async () => {
    await request(h.url, 'POST', '/v1/models', { headers: { ...auth(), 'content-length': '0' } });
    const got = h.relay.requests[0]!;
    expect(got.headers['content-length']).toBe('0');
    expect(got.headers['transfer-encoding']).toBeUndefined();
    expect(got.body.length).toBe(0);
  });

  it('passes the relay status, headers and body unchanged, and strips hop-by-hop headers both ways', async () => {
    h.relay.behave(() => true, {
      status: 418,
      body: '{"teapot":true}',
      headers: { 'x-custom': 'yes', 'set-cookie': ['a=1', 'b=2'], 'x-ratelimit-remaining-requests': '7', connection: 'x-drop-me', 'x-drop-me': '1', 'keep-alive': 'timeout=5' },
    });
    const r = await request(h.url, 'POST', '/v1/chat/completions', {
      headers: {
        ...auth(),
        'content-type': 'application/json',
        connection: 'keep-alive, x-secret-hop',
        'x-secret-hop': '1',
        te: 'trailers',
        'proxy-authorization': 'Basic eA==',
        'anthropic-beta': 'b1',
      },
      body: '{"model":"gpt-4o"}',
    });
    expect(r.status).toBe(418);
    expect(r.text).toBe('{"teapot":true}');
    expect(r.headers['x-custom']).toBe('yes');
    expect(r.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(r.headers['x-ratelimit-remaining-requests']).toBe('7');
    expect(r.headers['x-drop-me']).toBeUndefined();
    expect(r.headers['keep-alive']).not.toBe('timeout=5'); // the relay's own; sluice's connection has its own
    const sent = h.relay.requests[0]!.headers;
    expect(sent['x-secret-hop']).toBeUndefined();
    expect(sent.te).toBeUndefined();
    expect(sent['proxy-authorization']).toBeUndefined();
    expect(sent['anthropic-beta']).toBe('b1');
  });

  it('delivers SSE events as the relay writes them, without holding any back', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 300, sseEvents: 4 });
    const arrivals: number[] = [];
    const start = Date.now();
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...auth(), 'content-type': 'application/json' } }, (res) => {
        expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
        expect(res.headers['content-encoding']).toBeUndefined();
        res.on('data', (c: Buffer) => {
          for (const line of c.toString().split('\n')) if (line.startsWith('data:')) arrivals.push(Date.now() - start);
        });
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'gpt-4o', stream: true, messages: [] }));
    });
    expect(arrivals.length).toBeGreaterThanOrEqual(5);
    // Events arrive spread out like the relay sent them, not in one lump at the end.
    const spread = arrivals[arrivals.length - 1]! - arrivals[0]!;
    expect(spread).toBeGreaterThanOrEqual(4 * 300 * 0.8);
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]! - arrivals[i - 1]!).toBeLessThan(1000);
  });

  it('aborts the relay request when the client leaves mid-stream', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 200, sseEvents: 50 });
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...auth(), 'content-type': 'application/json' } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => {});
      req.end(JSON.stringify({ model: 'gpt-4o', stream: true }));
      setTimeout(() => reject(new Error('no data')), 5000);
    });
    await h.relay.waitFor((rs) => rs[0]?.closedEarly === true, 3000);
  });

  it('aborts the relay request when the client leaves before the relay answered', async () => {
    h.relay.behave(() => true, { delayMs: 3000 });
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...auth(), 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end(JSON.stringify({ model: 'gpt-4o' }));
    await h.relay.waitFor((rs) => rs.length === 1, 2000);
    req.destroy();
    await h.relay.waitFor((rs) => rs[0]?.closedEarly === true, 2000);
  });

  it('ends the client stream when the relay dies mid-stream instead of hanging', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 50, sseEvents: 20, dieAfterEvents: 3 });
    const outcome = await new Promise<string>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { ...auth(), 'content-type': 'application/json' } }, (res) => {
        res.on('data', () => {});
        res.on('end', () => resolve('end'));
        res.on('error', () => resolve('error'));
        res.on('close', () => resolve(res.complete ? 'complete' : 'aborted'));
      });
      req.on('error', () => resolve('error'));
      req.end(JSON.stringify({ model: 'gpt-4o', stream: true }));
      setTimeout(() => resolve('hung'), 5000);
    });
    expect(['error', 'aborted']).toContain(outcome);
  });

  it('answers 502 with a JSON error when the relay is unreachable, and keeps serving', async () => {
    const dead = await startHarness({ store: kind, env: { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:1' } });
    try {
      const k = (await dead.createKey('x')).key;
      const r = await request(dead.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${k}` }, body: '{"model":"gpt-4o"}' });
      expect(r.status).toBe(502);
      expect(JSON.parse(r.text).error.code).toBe('upstream_unreachable');
      expect((await request(dead.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${k}` } })).status).toBe(502);
    } finally {
      await dead.close();
    }
  });

  it('answers 413 with a JSON error over maxBodyBytes and forwards nothing', async () => {
    const big = Buffer.alloc(12 * 1024 * 1024 + 1, 0x61);
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: auth(), body: big }).catch((e: Error) => e);
    if (r instanceof Error) throw r;
    expect(r.status).toBe(413);
    expect(JSON.parse(r.text).error.code).toBe('request_body_too_large');
    // Chunked (no content-length) over the limit, too.
    const chunked = await new Promise<number>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: auth() }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', () => {});
      for (let i = 0; i < 13; i++) req.write(Buffer.alloc(1024 * 1024, 0x62));
      req.end();
    });
    expect(chunked).toBe(413);
    expect(h.relay.started).toBe(0);
  });

  it('survives hostile client bytes and keeps serving', async () => {
    const hostile = [
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTrailer: x-evil\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n0\r\nx-evil: 1\r\n\r\n`,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: 100\r\n\r\n{"model":`,
      `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`,
      'GARBAGE\r\n\r\n',
      `GET http://evil.example/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
      `GET /v1/%ZZ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    ];
    const answers = await Promise.all(hostile.map((h2) => rawExchange(port, h2, 400)));
    expect(answers[0]).toMatch(/^HTTP\/1\.1 400/); // truncated JSON is refused, not forwarded
    expect(answers[2]).toMatch(/^HTTP\/1\.1 431/);
    expect(answers[3]).toMatch(/^HTTP\/1\.1 400/);
    expect(answers[4]).toMatch(/^HTTP\/1\.1 400/);
    expect(answers[5]).toMatch(/^HTTP\/1\.1 400/);
    expect(answers[6]).toMatch(/^HTTP\/1\.1 400/);
    await sleep(100);
    expect((await request(h.url, 'GET', '/v1/models', { headers: auth() })).status).toBe(200);
  });

  it('does not forward an upload the client aborted', async () => {
    await new Promise<void>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: 1000\r\n\r\n{"model":"gpt`);
        setTimeout(() => {
          s.destroy();
          resolve();
        }, 100);
      });
      s.on('error', () => {});
    });
    await sleep(100);
    expect(h.relay.started).toBe(0);
    expect((await request(h.url, 'GET', '/v1/models', { headers: auth() })).status).toBe(200);
  });
});
