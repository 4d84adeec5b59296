/**
 * WebSocket sessions through sluice (`GET /v1/realtime`), with the `ws` client on real sockets:
 * bytes unchanged both ways, either side's end reaching the other, the relay's refusal of the
 * switch passed on as an ordinary answer, the idle bound and the drain's deadline cutting a
 * session, and what is not a WebSocket upgrade served as before. The SDK's own clients are in
 * test/conformance/realtime.test.ts.
 *
 * Skipped on Node 20, whose HTTP server upgrades nothing sluice can choose (src/http/upgrade.ts).
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, type RawData } from 'ws';
import { upgradesSupported } from '../../src/http/upgrade.js';
import { keyBody } from '../../src/auth/keys.js';
import { startHarness, useHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { lastRequest, metricReader } from '../support/helpers.js';
import { eventually, sleep } from '../support/time.js';
import { openRaw, rawConnections } from '../hostile/raw.js';

const PAID = 'vend-flash';

/** A WebSocket upgrade of `/v1/realtime` as a client writes it, `fields` (each ending in CRLF) among its headers. */
function upgradeRequest(fields: string): string {
  return `GET /v1/realtime?model=${PAID} HTTP/1.1\r\nHost: x\r\n${fields}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`;
}
const bearer = (key: string): string => `Authorization: Bearer ${key}\r\n`;

/** The fields that make a request a WebSocket upgrade, for `request()`. */
function upgradeFields(): Record<string, string> {
  return { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64') };
}

/** A client's WebSocket frame (RFC 6455 §5.2: final, masked), for a payload under 126 bytes. */
function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const body = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]!));
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), mask, body]);
}

/** A session opened with `key` on `h`, resolved once the relay's `session.created` arrived; its frames as they come. */
async function openSession(
  h: Harness,
  key: string,
  path = `/v1/realtime?model=${PAID}`,
): Promise<{ ws: WebSocket; frames: RawData[]; closed: Promise<{ code: number; reason: string }> }> {
  const ws = new WebSocket(`${h.url.replace('http', 'ws')}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const frames: RawData[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('error', () => undefined);
  ws.on('message', (data) => frames.push(data));
  await eventually(() => frames.length > 0, { what: 'session.created' });
  expect(JSON.parse(frames[0]!.toString())).toMatchObject({ type: 'session.created' });
  return { ws, frames, closed };
}

describe.skipIf(!upgradesSupported)('WebSocket sessions through sluice', () => {
  const log = capturedLog();
  const h = useHarness({ store: 'redis', log: log.log });
  let key = '';
  const sessions: WebSocket[] = [];
  const raw = rawConnections();
  beforeAll(async () => {
    key = (await h.createKey('ws')).key;
  });
  afterEach(() => {
    for (const ws of sessions.splice(0)) ws.terminate();
  });
  const openStreams = metricReader(h, 'sluice_open_streams');

  it('passes frames both ways unchanged: 1 MiB of binary echoed byte for byte, 200 text frames in order', async () => {
    const s = await openSession(h, key);
    const blob = randomBytes(1024 * 1024);
    s.ws.send(blob, { binary: true });
    for (let i = 0; i < 200; i++) s.ws.send(JSON.stringify({ type: 'n', i }));
    await eventually(() => s.frames.length === 202, { what: 'every echo' });
    expect(Buffer.compare(s.frames[1] as Buffer, blob)).toBe(0);
    const echoed = s.frames.slice(2).map((f) => JSON.parse(JSON.parse(f.toString()).received as string).i as number);
    expect(echoed).toEqual([...Array(200).keys()]);
    expect(await openStreams()).toBe(1);
    // The client's close is the session's end, not an abort.
    log.clear();
    s.ws.close();
    await s.closed;
    await eventually(() => expect(log.requests().map((l) => [l.path, l.decision, l.status])).toEqual([['/v1/realtime', 'admitted', 101]]));
  });

  it('the relay ending the session reaches the client with its close frame; logged once, admitted, status 101', async () => {
    log.clear();
    const s = await openSession(h, key);
    s.ws.send(JSON.stringify({ type: 'standin.close' }));
    expect(await s.closed).toEqual({ code: 1000, reason: 'done' });
    await eventually(async () => expect(await openStreams()).toBe(0));
    await eventually(() => expect(log.requests().map((l) => [l.path, l.decision, l.status])).toEqual([['/v1/realtime', 'admitted', 101]]));
  });

  it('a client that vanishes (no close frame) ends the relay session too', async () => {
    const s = await openSession(h, key);
    expect(h.relay.webSockets).toBe(1);
    s.ws.terminate();
    await eventually(() => h.relay.webSockets === 0, { what: 'the relay session to close' });
    await eventually(async () => expect(await openStreams()).toBe(0));
  });

  it('a relay that refuses the switch: its answer passed on whole, framed, and the connection closed', async () => {
    const busy = '{"error":{"message":"no channel for the model","type":"new_api_error"}}';
    h.relay.behave((r) => r.url.startsWith('/v1/realtime'), { status: 503, body: busy });
    const c = await openRaw(Number(new URL(h.url).port), upgradeRequest(bearer(key)));
    raw.push(c);
    await c.waitFor(/(?!)/, 3_000);
    // Closed by sluice once the answer was out, the client doing nothing.
    expect(c.closed).toBe(true);
    const [head, body] = c.text().split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 503 /);
    expect(head).toMatch(new RegExp(`\r\ncontent-length: ${busy.length}\r\n`, 'i'));
    expect(body).toBe(busy);
    // An upgrade of a route the relay does not switch on: its ordinary answer, whole.
    const list = await request(h.url, 'GET', '/v1/models', {
      headers: {
        authorization: `Bearer ${key}`,
        ...upgradeFields(),
      },
    });
    expect(list.status).toBe(200);
    expect(JSON.parse(list.text)).toMatchObject({ object: 'list' });
    expect(list.headers.connection).toBe('close');
  });

  it('a key in Sec-WebSocket-Protocol the relay could read otherwise than sluice (a no-break space Go trims, two keys) is refused; the relay sees nothing', async () => {
    const other = (await h.createKey('ws-other')).key;
    const started = h.relay.started;
    for (const protocol of [
      `realtime, \xc2\xa0openai-insecure-api-key.${other}, openai-insecure-api-key.${key}`,
      `realtime, \xa0openai-insecure-api-key.${key}, openai-insecure-api-key.${other}`,
      `openai-insecure-api-key.${key}, openai-insecure-api-key.${other}`,
    ]) {
      const c = await openRaw(Number(new URL(h.url).port), Buffer.from(upgradeRequest(`Sec-WebSocket-Protocol: ${protocol}\r\n`), 'latin1'));
      raw.push(c);
      expect(await c.waitFor(/\r\n\r\n[\s\S]*\}/, 3_000)).toMatch(/^HTTP\/1\.1 401 /);
    }
    expect(h.relay.started).toBe(started);
  });

  it('a key that is no token (`sk-<key>-5,x`) is refused on an upgrade: in the protocol list the relay would read `sk-<key>-5`', async () => {
    const started = h.relay.started;
    const r = await request(h.url, 'GET', `/v1/realtime?model=${PAID}`, {
      headers: {
        authorization: `Bearer ${key}-5,x`,
        ...upgradeFields(),
        'sec-websocket-protocol': 'realtime',
      },
    });
    expect(r.status).toBe(401);
    expect(h.relay.started).toBe(started);
  });

  it('early bytes past 4 KiB before the switch close the connection: logged client_aborted, the relay opens nothing', async () => {
    h.relay.behave((r) => r.url.startsWith('/v1/realtime'), { delayMs: 500 });
    await eventually(async () => expect(await metricReader(h, 'sluice_inflight_requests')()).toBe(0));
    log.clear();
    const c = await openRaw(Number(new URL(h.url).port), Buffer.concat([Buffer.from(upgradeRequest(bearer(key))), randomBytes(5 * 1024)]));
    raw.push(c);
    await c.waitFor(/(?!)/, 2_000);
    expect(c.closed).toBe(true);
    expect(c.text()).toBe('');
    await eventually(() => expect(log.requests().map((l) => l.decision)).toEqual(['client_aborted']));
    await sleep(700);
    expect(h.relay.webSockets).toBe(0);
  });

  it('a flood of upgrades with wrong keys: each refused before the relay, every connection let go', async () => {
    const started = h.relay.started;
    const port = Number(new URL(h.url).port);
    const flood = await Promise.all(Array.from({ length: 100 }, () => openRaw(port, upgradeRequest(bearer(`sk-${randomBytes(24).toString('hex')}`)))));
    raw.push(...flood);
    const answers = await Promise.all(flood.map((c) => c.waitFor(/\r\n\r\n/, 5_000)));
    // 401, or 503 where the replica's ceiling on lookups of unknown keys held one back.
    for (const text of answers) expect(text).toMatch(/^HTTP\/1\.1 (401|503) /);
    expect(h.relay.started).toBe(started);
    await eventually(async () => expect(await metricReader(h, 'sluice_open_connections')()).toBe(0));
  });

  it('a client with its key in Authorization and `realtime` offered: the relay reads that key from the protocol list too, and `realtime` is agreed', async () => {
    const ws = new WebSocket(`${h.url.replace('http', 'ws')}/v1/realtime?model=${PAID}`, ['realtime'], { headers: { authorization: `Bearer ${key}` } });
    sessions.push(ws);
    ws.on('error', () => undefined);
    await new Promise((resolve) => ws.on('open', resolve));
    expect(ws.protocol).toBe('realtime');
    const r = lastRequest(h.relay);
    expect(r.headers['sec-websocket-protocol']).toBe(`realtime, openai-insecure-api-key.sk-${keyBody(key)}`);
    expect(r.key).toBe(`sk-${keyBody(key)}`);
  });

  it('what a client sends before the switch (under 4 KiB) reaches the relay once it switched', async () => {
    const c = await openRaw(Number(new URL(h.url).port), Buffer.concat([Buffer.from(upgradeRequest(bearer(key))), maskedFrame(0x1, Buffer.from('{"type":"early"}'))]));
    raw.push(c);
    expect(await c.waitFor(/standin\.echo/, 3_000)).toContain('{\\"type\\":\\"early\\"}');
  });

  it('a client that leaves before the relay switched is seen at once: logged client_aborted, nothing held, and no session opens when the relay answers', async () => {
    h.relay.behave((r) => r.url.startsWith('/v1/realtime'), { delayMs: 800 });
    // The sessions of the tests before have ended, and had their lines.
    await eventually(async () => expect(await metricReader(h, 'sluice_inflight_requests')()).toBe(0));
    log.clear();
    const c = await openRaw(Number(new URL(h.url).port), upgradeRequest(bearer(key)));
    await h.relay.waitFor((rs) => rs.some((r) => r.url.startsWith('/v1/realtime')), 3_000);
    const left = Date.now();
    c.destroy();
    await eventually(() => expect(log.requests().map((l) => [l.decision, l.status])).toEqual([['client_aborted', undefined]]), { intervalMs: 20 });
    // Seen as it happened, not when the relay answered (800 ms on).
    expect(Date.now() - left).toBeLessThan(500);
    await sleep(1_000);
    expect(h.relay.webSockets).toBe(0);
    expect(await metricReader(h, 'sluice_inflight_requests')()).toBe(0);
  });

  it("what is not a WebSocket upgrade is an ordinary request: curl's h2c upgrade of a POST reaches the relay with its body and without Upgrade", async () => {
    const body = JSON.stringify({ model: PAID, messages: [{ role: 'user', content: 'hi' }] });
    const r = await request(h.url, 'POST', '/v1/chat/completions', {
      headers: { authorization: `Bearer ${key}`, connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA' },
      body,
    });
    expect(r.status).toBe(200);
    const seen = lastRequest(h.relay);
    expect(seen.body.toString()).toBe(body);
    expect(seen.headers.upgrade).toBeUndefined();
    expect(seen.headers['http2-settings']).toBeUndefined();
  });

  it('an upgrade pipelined behind a request still being answered closes that connection; sluice serves on', async () => {
    h.relay.behave((r) => r.url === '/v1/chat/completions', { delayMs: 500 });
    const body = JSON.stringify({ model: PAID });
    const c = await openRaw(
      Number(new URL(h.url).port),
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        upgradeRequest(bearer(key)),
    );
    raw.push(c);
    await c.waitFor(/(?!)/, 2_000);
    expect(c.closed).toBe(true);
    expect(c.text()).not.toContain('101 Switching');
    const s = await openSession(h, key);
    sessions.push(s.ws);
  });

  it('an unreachable relay: 502 on the upgrade, in the relay JSON shape', async () => {
    const dead = await startHarness({ store: 'memory', env: { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:1' } });
    try {
      const k = (await dead.createKey('ws-dead')).key;
      const r = await request(dead.url, 'GET', `/v1/realtime?model=${PAID}`, {
        headers: {
          authorization: `Bearer ${k}`,
          ...upgradeFields(),
        },
      });
      expect(r.status).toBe(502);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'upstream_unreachable' } });
    } finally {
      await dead.close();
    }
  });
});

describe.skipIf(!upgradesSupported)('WebSocket sessions: bounds', () => {
  it('a session silent both ways for upstream.idleTimeoutSeconds is cut: logged answer_stalled, reason relay_silent', async () => {
    const log = capturedLog();
    const h = await startHarness({ store: 'memory', log: log.log, file: { upstream: { idleTimeoutSeconds: 1 } } });
    try {
      const { key } = await h.createKey('ws-idle');
      const s = await openSession(h, key);
      const started = Date.now();
      const closed = await s.closed;
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(closed.code).toBe(1006); // no close frame: the connection was cut
      await eventually(() => h.relay.webSockets === 0);
      await eventually(() => expect(log.requests().map((l) => [l.decision, l.reason, l.status])).toEqual([['answer_stalled', 'relay_silent', 101]]));
    } finally {
      await h.close();
    }
  });

  it('a session that keeps talking outlives the idle bound', async () => {
    const h = await startHarness({ store: 'memory', file: { upstream: { idleTimeoutSeconds: 1 } } });
    try {
      const { key } = await h.createKey('ws-busy');
      const s = await openSession(h, key);
      for (let i = 0; i < 6; i++) {
        await sleep(400);
        s.ws.send('{"type":"ping"}');
      }
      expect(s.ws.readyState).toBe(WebSocket.OPEN);
      s.ws.close();
      await s.closed;
    } finally {
      await h.close();
    }
  });

  it('a drain leaves a session open until its deadline, then cuts it: logged drain_deadline', async () => {
    const log = capturedLog();
    const h = await startHarness({ store: 'memory', log: log.log, file: { drainSeconds: 1 } });
    try {
      const { key } = await h.createKey('ws-drain');
      const s = await openSession(h, key);
      const t0 = Date.now();
      const drained = await h.sluice.drain();
      expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
      expect(Date.now() - t0).toBeLessThan(3_000);
      expect(drained.forced).toBe(1);
      expect((await s.closed).code).toBe(1006);
      await eventually(() => h.relay.webSockets === 0);
      await eventually(() => expect(log.requests().map((l) => [l.decision, l.status])).toEqual([['drain_deadline', 101]]));
    } finally {
      await h.close();
    }
  });

  it('a refused upgrade whose client keeps its side open is closed server.headersTimeoutSeconds after the answer', async () => {
    const h = await startHarness({ store: 'memory', file: { server: { headersTimeoutSeconds: 1 } } });
    const client = net.connect({ port: Number(new URL(h.url).port), host: '127.0.0.1', allowHalfOpen: true });
    try {
      let answer = '';
      client.on('data', (b: Buffer) => (answer += b.toString('latin1')));
      client.on('error', () => undefined);
      client.write(upgradeRequest(bearer('sk-wrong-key-0123456789')));
      await eventually(() => answer.startsWith('HTTP/1.1 401 '), { what: 'the 401', intervalMs: 10 });
      const answered = Date.now();
      const connections = metricReader(h, 'sluice_open_connections');
      expect(await connections()).toBe(1);
      // The client keeps its side open: sluice lets go of it all the same, once the linger is out.
      await eventually(async () => expect(await connections()).toBe(0), { timeoutMs: 4_000 });
      expect(Date.now() - answered).toBeGreaterThanOrEqual(900);
    } finally {
      client.destroy();
      await h.close();
    }
  });

  it('a drain cuts an upgrade still waiting for the relay at its deadline: logged drain_deadline, and no session opens after', async () => {
    const log = capturedLog();
    const h = await startHarness({ store: 'memory', log: log.log, file: { drainSeconds: 1 } });
    try {
      const { key } = await h.createKey('ws-drain-pending');
      h.relay.behave(() => true, { delayMs: 2_000 });
      const ws = new WebSocket(`${h.url.replace('http', 'ws')}/v1/realtime?model=${PAID}`, { headers: { authorization: `Bearer ${key}` } });
      ws.on('error', () => undefined);
      const closed = new Promise((resolve) => ws.on('close', resolve));
      await h.relay.waitFor((rs) => rs.length === 1, 3_000);
      expect((await h.sluice.drain()).forced).toBe(1);
      await closed;
      await eventually(() => expect(log.requests().map((l) => [l.decision, l.status])).toEqual([['drain_deadline', undefined]]));
      await sleep(1_500);
      expect(h.relay.webSockets).toBe(0);
    } finally {
      await h.close();
    }
  });

  it('a client still sending after the relay ended the session: its close is seen at once, not after the linger', async () => {
    const log = capturedLog();
    const h = await startHarness({ store: 'memory', log: log.log, file: { server: { headersTimeoutSeconds: 5 } } });
    const client = net.connect({ port: Number(new URL(h.url).port), host: '127.0.0.1', allowHalfOpen: true });
    try {
      const { key } = await h.createKey('ws-late-sender');
      let received = Buffer.alloc(0);
      client.on('data', (b: Buffer) => (received = Buffer.concat([received, b])));
      client.on('error', () => undefined);
      client.write(upgradeRequest(bearer(key)));
      await eventually(() => received.includes('session.created'), { what: 'the session to open' });
      client.write(maskedFrame(0x1, Buffer.from('{"type":"standin.close"}')));
      // The relay's closing frame (opcode 8), answered with the client's own: the relay then ends its connection.
      await eventually(() => received.includes(Buffer.from([0x88])), { what: "the relay's closing frame" });
      client.write(maskedFrame(0x8, Buffer.from([0x03, 0xe8])));
      await sleep(300);
      // Bytes after its close (a client's frames in flight), then its end.
      client.write(randomBytes(64 * 1024));
      const ended = Date.now();
      client.end();
      await eventually(() => expect(log.requests().map((l) => [l.decision, l.status])).toEqual([['admitted', 101]]), { timeoutMs: 8_000 });
      expect(Date.now() - ended).toBeLessThan(2_000);
    } finally {
      client.destroy();
      await h.close();
    }
  });

  it('a client that ends its side while the relay keeps its own open: the session ends server.headersTimeoutSeconds later', async () => {
    // A relay that switches, then neither sends nor closes (it keeps its side open after the client's end).
    const relaySockets = new Set<net.Socket>();
    const relay = net.createServer({ allowHalfOpen: true }, (s) => {
      relaySockets.add(s);
      s.on('error', () => undefined);
      s.once('data', () => s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const log = capturedLog();
    const h = await startHarness({
      store: 'memory',
      log: log.log,
      file: { server: { headersTimeoutSeconds: 1 } },
      env: { SLUICE_UPSTREAM_URL: `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}` },
    });
    try {
      const { key } = await h.createKey('ws-client-ends');
      const c = await openRaw(Number(new URL(h.url).port), upgradeRequest(bearer(key)));
      expect(await c.waitFor(/\r\n\r\n/, 3_000)).toMatch(/^HTTP\/1\.1 101 /);
      const ended = Date.now();
      c.socket.end();
      await eventually(() => expect(log.requests().map((l) => [l.decision, l.status])).toEqual([['admitted', 101]]), { timeoutMs: 5_000 });
      expect(Date.now() - ended).toBeLessThan(3_000);
      expect(Date.now() - ended).toBeGreaterThanOrEqual(900);
      expect(await metricReader(h, 'sluice_open_streams')()).toBe(0);
      c.destroy();
    } finally {
      await h.close();
      for (const s of relaySockets) s.destroy();
      await new Promise((resolve) => relay.close(resolve));
    }
  });

  it('closing sluice without a drain closes its sessions at once', async () => {
    const h = await startHarness({ store: 'memory' });
    const { key } = await h.createKey('ws-close');
    const s = await openSession(h, key);
    const t0 = Date.now();
    await h.sluice.close();
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect((await s.closed).code).toBe(1006);
    await h.relay.close();
  });
});
