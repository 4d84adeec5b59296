/**
 * Hostile resources (issue 17, items 4-7): memory, connections and waits are bounded, and the
 * process keeps serving what it admitted. Memory and descriptors are read from a sluice running
 * as its own process (/proc/<pid>); everything is on loopback and bounded in time and count.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { ZSTD_C_WINDOW_LOG, zstdCompressSync } from '../support/zstd.js';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { descriptorBound } from '../../src/http/connections.js';
import { MAX_CONNECTIONS_CAP } from '../../src/config/index.js';
import { startRelayStandin, STANDIN_TEXT, type RelayStandin } from '../../demo/relay.js';
import { useHarness } from '../support/harness.js';
import { metricValue, metricsText } from '../support/helpers.js';
import { startChildSluice, metric, type ChildSluice } from '../support/child-sluice.js';
import { answerJson, ensureOwnDescriptors, finalStatus, openRaw, rawConnections, type RawConnection } from './raw.js';
import { eventually, sleep } from '../support/time.js';
import { capturedLog } from '../support/log.js';

const MiB = 1024 * 1024;

/** A JSON body of exactly `size` bytes that names a paid model. */
function jsonBody(size: number): Buffer {
  const head = Buffer.from('{"model":"gpt-4o","input":"');
  const tail = Buffer.from('"}');
  const b = Buffer.alloc(size, 0x61);
  head.copy(b, 0);
  tail.copy(b, size - tail.length);
  return b;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One POST on its own connection; a connection error is an answer of status 0. */
function post(port: number, path: string, headers: http.OutgoingHttpHeaders, body: Buffer, agent: http.Agent | false = false): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path, agent, headers: { 'content-length': body.length, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', (err) => resolve({ status: 0, headers: {}, text: err.message }));
    req.end(body);
  });
}

/** The sluice container's memory limit in the shipped Deployment, in bytes. */
function podMemoryLimit(): number {
  const doc = parseYaml(readFileSync(new URL('../../deploy/base/deployment.yaml', import.meta.url), 'utf8')) as {
    spec: { template: { spec: { initContainers: Array<{ name: string; resources: { limits: { memory: string } } }> } } };
  };
  const sidecar = doc.spec.template.spec.initContainers.find((c) => c.name === 'sluice')!;
  const m = /^(\d+)(Mi|Gi)$/.exec(sidecar.resources.limits.memory)!;
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 * MiB : MiB);
}

/** docs/operations.md, Sizing: what one open stream costs (client and relay sockets, Node's HTTP objects). */
const STREAM_BYTES = 25 * 1024;

describe('memory: request bodies in flight (sluice as its own process)', () => {
  let relay: RelayStandin;
  let child: ChildSluice;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true, maxRecorded: 2 });
    child = await startChildSluice({ relayUrl: relay.url });
  });
  afterAll(async () => {
    await child?.close();
    await relay?.close();
  });

  it('stay under the Pod memory limit, with room left for a full connection cap of streams, whatever arrives at once: 32 MiB bodies, gzip, brotli and (where Node decodes it) zstd bombs, bodies sent half and stalled', async () => {
    const key = await child.createKey('flood');
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const limit = podMemoryLimit();
    const idle = child.memory().rss;

    // A stream admitted before the flood must run to its end, untouched.
    relay.behave((r) => r.url === '/v1/chat/completions', { sseEvents: 12, sseIntervalMs: 150 });
    const streamed = post(child.port, '/v1/chat/completions', auth, Buffer.from(JSON.stringify({ model: 'gpt-4o', stream: true, messages: [] })));

    const raw = jsonBody(32 * MiB);
    // 32 KB of gzip and 56 bytes of brotli (a 16 MiB window) that both decode to 32 MiB.
    const gz = gzipSync(raw, { level: 9 });
    const br = brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_LGWIN]: 24, [constants.BROTLI_PARAM_QUALITY]: 4 } });
    expect(gz.length).toBeLessThan(64 * 1024);
    expect(br.length).toBeLessThan(1024);
    // And zstd where Node has it (the image's Node 26): a frame with an 8 MiB window.
    const zs = zstdCompressSync?.(raw, { params: { [ZSTD_C_WINDOW_LOG]: 23 } });
    if (zs) expect(zs.length).toBeLessThan(64 * 1024);

    // Two waves, all at once within each: bodies declared at 32 MiB, half sent, then nothing (they
    // stay to the end); 32 MiB bodies sent whole; gzip and brotli bombs.
    const stalledHead = `POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${32 * MiB}\r\n\r\n`;
    const stalledOpen = Array.from({ length: 8 }, () =>
      openRaw(child.port, stalledHead).then((c) => {
        c.write(raw.subarray(0, 16 * MiB));
        return c;
      }),
    );
    const answers: Answer[] = [];
    for (let wave = 0; wave < 2; wave++) {
      const flood: Array<Promise<Answer>> = [];
      for (let i = 0; i < 6; i++) flood.push(post(child.port, '/v1/responses', auth, raw));
      for (let i = 0; i < 16; i++) flood.push(post(child.port, '/v1/responses', { ...auth, 'content-encoding': 'gzip' }, gz));
      for (let i = 0; i < 16; i++) flood.push(post(child.port, '/v1/responses', { ...auth, 'content-encoding': 'br' }, br));
      for (let i = 0; zs && i < 16; i++) flood.push(post(child.port, '/v1/responses', { ...auth, 'content-encoding': 'zstd' }, zs));
      const got = await Promise.race([Promise.all(flood), sleep(60_000).then(() => null)]);
      expect(got, 'every request of the wave is answered within 60 s').not.toBeNull();
      answers.push(...got!);
    }
    const stalled = await Promise.all(stalledOpen);

    // Memory: the peak (VmHWM) must leave room under the Pod limit for the default connection cap
    // of open streams (docs/operations.md, Sizing).
    const { peak } = child.memory();
    const room = limit - MAX_CONNECTIONS_CAP * STREAM_BYTES;
    console.info(
      `[hostile memory] idle ${(idle / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB, limit ${limit / MiB} MiB, room for bodies ${(room / MiB).toFixed(0)} MiB`,
    );
    expect(peak, `peak RSS ${(peak / MiB).toFixed(0)} MiB (idle ${(idle / MiB).toFixed(0)} MiB) against ${(room / MiB).toFixed(0)} MiB`).toBeLessThan(room);

    // Each answer is one of: forwarded, too large once decoded, or the budget's 503 in the relay's JSON shape.
    const seen = new Set<string>();
    for (const a of answers) {
      if (a.status === 503) {
        expect(JSON.parse(a.text)).toMatchObject({ error: { code: 'gateway_busy', type: 'new_api_error' } });
        expect(a.headers['retry-after']).toBe('1');
      } else if (a.status === 413) {
        expect(JSON.parse(a.text)).toMatchObject({ error: { code: 'request_body_too_large' } });
      } else {
        expect(a.status, a.text).toBe(200);
      }
      seen.add(String(a.status));
    }
    // The budget was reached (the flood is the worst case, not a gentle one).
    expect(seen.has('503')).toBe(true);

    // The stream admitted first ran to its end.
    const stream = await streamed;
    expect(stream.status).toBe(200);
    const deltas = [...stream.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('');
    expect(deltas).toBe(STANDIN_TEXT);

    // Nothing stays held once the stalled clients leave, and the replica serves a body again.
    for (const c of stalled) c.destroy();
    await eventually(async () => expect(await metric(child.adminUrl, 'sluice_body_bytes')).toBe(0), { timeoutMs: 5_000, intervalMs: 50 });
    const after = await post(child.port, '/v1/responses', auth, jsonBody(MiB));
    expect(after.status).toBe(200);
  }, 90_000);
});

/** What the bodies in flight hold (`sluice_body_bytes`), once it satisfies `pred` or 3 s have passed. */
async function bodyBytesBecome(h: { adminUrl: string }, pred: number | ((n: number) => boolean)): Promise<number | undefined> {
  const ok = typeof pred === 'number' ? (n: number) => n === pred : pred;
  const bodyBytes = async (): Promise<number | undefined> => metricValue(await metricsText(h), 'sluice_body_bytes');
  let n: number | undefined;
  // Satisfied or not, the caller's check says what it was.
  await eventually(
    async () => {
      n = await bodyBytes();
      return n !== undefined && ok(n);
    },
    { timeoutMs: 3_000, intervalMs: 20 },
  ).catch(() => {});
  return n;
}

describe('the bodies budget', () => {
  // Bodies under 256 KB are held as the chunks that came (no single buffer), so what each holds is exactly what it sent.
  const h = useHarness({ store: 'memory', file: { maxBodyBytes: MiB, bodyBudgetBytes: MiB, maxDecodedBodyBytes: 512 * 1024 } });
  let key = '';
  // biome-ignore lint/suspicious/noThenProperty: rawConnections' option, in an object that is never awaited
  const open = rawConnections({ then: () => heldBecomes(0) });
  beforeAll(async () => {
    key = (await h.createKey('budget')).key;
  });
  const auth = (): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });
  const port = (): number => Number(new URL(h.url).port);
  const heldBecomes = (pred: number | ((n: number) => boolean)): Promise<number | undefined> => bodyBytesBecome(h, pred);

  /** Four bodies declared at 250,000 bytes, 200,000 of each sent: 800,000 bytes held of 1 MiB. */
  async function stallFour(): Promise<RawConnection[]> {
    const out: RawConnection[] = [];
    for (let i = 0; i < 4; i++) {
      const c = await openRaw(port(), `POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 250000\r\n\r\n`);
      c.write(jsonBody(250_000).subarray(0, 200_000));
      out.push(c);
      open.push(c);
    }
    // Until sluice holds them all (what it holds is checked by the tests themselves).
    await heldBecomes(800_000);
    return out;
  }

  it("answers 503 gateway_busy with Retry-After, in the relay's JSON shape, to a body the bodies in flight leave no room for, forwards nothing of it, and lets the others finish", async () => {
    const stalled = await stallFour();
    // Declared larger than what is free (1 MiB - 800,000 = 248,576 bytes): refused before a byte of it is read.
    const refused = await post(port(), '/v1/responses', auth(), jsonBody(300_000));
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['content-type']).toBe('application/json');
    const body = JSON.parse(refused.text) as { error: { code: string; message: string; type: string } };
    expect(body.error).toMatchObject({ code: 'gateway_busy', type: 'new_api_error' });
    expect(body.error.message).toMatch(/\(request id: [^)]+\)$/);
    expect(h.relay.started).toBe(0);
    // One that fits still goes through.
    expect((await post(port(), '/v1/responses', auth(), jsonBody(200_000))).status).toBe(200);

    // The admitted bodies complete and are forwarded byte for byte.
    for (const c of stalled) c.write(jsonBody(250_000).subarray(200_000));
    for (const c of stalled) expect(finalStatus(await c.waitFor(/HTTP\/1\.1 200/, 5_000))).toBe(200);
    await h.relay.waitFor((r) => r.length === 5);
    expect(h.relay.requests.filter((r) => r.body.equals(jsonBody(250_000)))).toHaveLength(4);
    // Handed to the relay: the budget holds nothing any more.
    expect(await heldBecomes(0)).toBe(0);
    // The whole budget refused it (one address may hold all of a budget no larger than maxBodyBytes).
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_body_budget_refusals_total', { bound: 'budget_full' })).toBe(1);
    expect(metricValue(text, 'sluice_body_budget_refusals_total', { bound: 'address_share' })).toBe(0);
  });

  it('refuses, part-way, a body of unknown length that the budget cannot take; the client, still sending, reads the 503', async () => {
    await stallFour();
    const answer = await new Promise<Answer>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: port(), method: 'POST', path: '/v1/responses', agent: false, headers: auth() }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      });
      req.on('error', (err) => resolve({ status: 0, headers: {}, text: err.message }));
      // Chunked: nothing declared; 400 KB sent, then more of it while the answer comes.
      req.write(jsonBody(MiB).subarray(0, 400 * 1024));
      setTimeout(() => req.end(jsonBody(MiB).subarray(400 * 1024, 600 * 1024)), 100);
    });
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'gateway_busy' } });
    expect(h.relay.started).toBe(0);
  });

  it('counts decoded bytes too: a compressed body that decodes past maxDecodedBodyBytes gets 413 naming that limit, and leaves nothing held', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * MiB, 0x20));
    const r = await post(port(), '/v1/responses', { ...auth(), 'content-encoding': 'gzip' }, bomb);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.text).error.message).toContain(`${512 * 1024} bytes once its content-encoding is undone`);
    expect(await heldBecomes(0)).toBe(0);
    expect(h.relay.started).toBe(0);
    // Within the limit, a compressed body is read and forwarded as sent.
    const small = gzipSync(Buffer.from(JSON.stringify({ model: 'gpt-4o', input: 'x'.repeat(1000) })));
    const ok = await post(port(), '/v1/responses', { ...auth(), 'content-encoding': 'gzip' }, small);
    expect(ok.status).toBe(200);
    expect(h.relay.requests[0]!.body.equals(small)).toBe(true);
  });

  it('counts what a decoder needs: brotli that asks for a 16 MiB window gets 503, the same body gzipped is read', async () => {
    const data = Buffer.from(JSON.stringify({ model: 'gpt-4o', input: ' '.repeat(200 * 1024) }));
    // A few dozen bytes that make the decoder allocate its 16 MiB ring buffer: past the 1 MiB budget on their own.
    const br = brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_LGWIN]: 24 } });
    expect(br.length).toBeLessThan(200);
    const r = await post(port(), '/v1/responses', { ...auth(), 'content-encoding': 'br' }, br);
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'gateway_busy' } });
    expect(h.relay.started).toBe(0);
    expect(await heldBecomes(0)).toBe(0);
    expect((await post(port(), '/v1/responses', { ...auth(), 'content-encoding': 'gzip' }, gzipSync(data))).status).toBe(200);
  });
});

describe('the bodies budget, per client address', () => {
  // Half of 2 MiB is 1 MiB, the body limit: one address may hold 1 MiB of the 2.
  const logged = capturedLog();
  const h = useHarness({ store: 'memory', log: logged.log, file: { maxBodyBytes: MiB, bodyBudgetBytes: 2 * MiB, maxDecodedBodyBytes: 512 * 1024 } });
  // biome-ignore lint/suspicious/noThenProperty: rawConnections' option, in an object that is never awaited
  const open = rawConnections({ then: () => bodyBytesBecome(h, 0) });
  const other = new http.Agent({ localAddress: '127.0.0.2' });
  afterAll(() => other.destroy());

  it("lets one client, stalling uploads, hold no more than its share: its next body gets 503, another client's goes through", async () => {
    const { key } = await h.createKey('hog');
    const port = Number(new URL(h.url).port);
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    // Four bodies from 127.0.0.1 declared at 250,000 bytes, 200,000 of each sent: 800,000 held.
    const stalled: RawConnection[] = [];
    for (let i = 0; i < 4; i++) {
      const c = await openRaw(port, `POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 250000\r\n\r\n`);
      c.write(jsonBody(250_000).subarray(0, 200_000));
      stalled.push(c);
      open.push(c);
    }
    await bodyBytesBecome(h, 800_000);
    // The budget has 1,297,152 bytes free; 127.0.0.1's share only 248,576.
    const same = await post(port, '/v1/responses', auth, jsonBody(300_000));
    expect(same.status).toBe(503);
    expect(JSON.parse(same.text)).toMatchObject({ error: { code: 'gateway_busy', type: 'new_api_error' } });
    // Operators see which bound it was: the address's share, not the whole budget.
    expect(logged.requests().filter((l) => l.status === 503)).toEqual([expect.objectContaining({ reason: 'address_share', user: 'hog', ip: '127.0.0.1' })]);
    const text = await metricsText(h);
    expect(metricValue(text, 'sluice_body_budget_refusals_total', { bound: 'address_share' })).toBe(1);
    expect(metricValue(text, 'sluice_body_budget_refusals_total', { bound: 'budget_full' })).toBe(0);
    expect((await post(port, '/v1/responses', auth, jsonBody(300_000), other)).status).toBe(200);
    // The stalled ones finish, and their address has its share again.
    for (const c of stalled) c.write(jsonBody(250_000).subarray(200_000));
    for (const c of stalled) expect(finalStatus(await c.waitFor(/HTTP\/1\.1 200/, 5_000))).toBe(200);
    expect(await bodyBytesBecome(h, 0)).toBe(0);
    expect((await post(port, '/v1/responses', auth, jsonBody(300_000))).status).toBe(200);
  });
});

describe('the bodies budget, toward a client that closes its connection', () => {
  // Bodies larger than the loopback socket buffers can take whole: the client is still writing when the answer is due.
  const h = useHarness({ store: 'memory', file: { maxBodyBytes: 4 * MiB, bodyBudgetBytes: 4 * MiB, maxDecodedBodyBytes: MiB } });
  let key = '';
  const open = rawConnections({ after: 'all' });
  beforeAll(async () => {
    key = (await h.createKey('budget-close')).key;
  });
  const head = (length: number, extra = ''): string =>
    `POST /v1/responses HTTP/1.1\r\nHost: x\r\n${extra}Authorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  it('answers 503 gateway_busy to a `Connection: close` client sending a body the budget refuses, once the body is in: the client, still writing, reads the answer instead of a reset', async () => {
    const port = Number(new URL(h.url).port);
    // Three bodies declared at 1 MiB + 1,000 bytes, all but the last 1,000 sent: 3 MiB of 4 held.
    for (let i = 0; i < 3; i++) {
      const c = await openRaw(port, head(MiB + 1000));
      c.write(jsonBody(MiB + 1000).subarray(0, MiB));
      open.push(c);
    }
    expect(await bodyBytesBecome(h, (n) => n >= 3 * MiB)).toBeGreaterThanOrEqual(3 * MiB);

    for (let i = 0; i < 3; i++) {
      const body = jsonBody(4 * MiB);
      const c = await openRaw(port);
      open.push(c);
      const errors: string[] = [];
      c.socket.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
      // Headers and the whole body in one write, as an HTTP client library sends them.
      c.socket.write(Buffer.concat([Buffer.from(head(body.length, 'Connection: close\r\n')), body]));
      await c.waitFor(/(?!)/, 5_000); // until sluice closes the connection
      expect(c.closed).toBe(true);
      expect(errors, "the client's writes never fail").toEqual([]);
      expect(finalStatus(c.text())).toBe(503);
      expect(answerJson(c.text())).toMatchObject({ error: { code: 'gateway_busy', type: 'new_api_error' } });
    }
    expect(h.relay.started).toBe(0);
  });
});

describe('connections (sluice as its own process, under a low descriptor limit)', () => {
  let relay: RelayStandin;
  beforeAll(async () => {
    ensureOwnDescriptors(4096);
    relay = await startRelayStandin({ quiet: true });
    // Every call needs a relay connection of its own: the relay closes each after its answer.
    relay.behave((r) => r.url === '/v1/chat/completions', { delayMs: 300, headers: { connection: 'close' } });
  });
  afterAll(() => relay?.close());

  /** `n` connections that each send half a header block and wait. */
  async function halfHeaders(port: number, n: number): Promise<RawConnection[]> {
    const out: RawConnection[] = [];
    const pending: Array<Promise<void>> = [];
    for (let i = 0; i < n; i++) {
      pending.push(
        openRaw(port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\n').then(
          (c) => void out.push(c),
          () => {},
        ),
      );
    }
    await Promise.all(pending);
    return out;
  }

  /** Three calls at once over three connections opened before the flood: they need relay connections of their own. */
  async function threeCalls(agent: http.Agent, port: number, key: string): Promise<Answer[]> {
    const body = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [] }));
    return Promise.all([0, 1, 2].map(() => post(port, '/v1/chat/completions', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body, agent)));
  }

  it('are capped below the descriptor limit: 700 half-sent header blocks leave the relay reachable for connections already open, readiness says the replica is full, and each held block gets 408 after the headers timeout', async () => {
    const nofile = 640;
    const child = await startChildSluice({ relayUrl: relay.url, nofile, config: { server: { headersTimeoutSeconds: 2, requestTimeoutSeconds: 4 } } });
    const flood: RawConnection[] = [];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 });
    try {
      const cap = descriptorBound(nofile);
      const key = await child.createKey('conn');
      expect((await threeCalls(agent, child.port, key)).map((a) => a.status)).toEqual([200, 200, 200]);

      flood.push(...(await halfHeaders(child.port, 700)));
      await sleep(300);
      // Over the cap, connections are closed as they arrive; the held ones stay within it.
      const held = flood.filter((c) => !c.closed).length;
      // The three connections opened before still reach the relay.
      const during = await threeCalls(agent, child.port, key);
      expect(during.map((a) => `${a.status} ${a.status === 200 ? '' : a.text}`)).toEqual(['200 ', '200 ', '200 ']);
      const fds = child.descriptors();
      console.info(`[hostile connections] ulimit -n ${nofile}, cap ${cap}: ${held} of ${flood.length} flood connections held, ${fds} descriptors open`);
      expect(held).toBeLessThanOrEqual(cap);
      expect(fds).toBeLessThan(nofile);
      expect(child.listening).toMatchObject({ openFileLimit: nofile, maxConnections: cap });
      // Liveness stays, readiness says it takes no more, the metrics say why.
      expect((await fetch(`${child.adminUrl}/healthz`)).status).toBe(200);
      expect((await fetch(`${child.adminUrl}/readyz`)).status).toBe(503);
      expect(await metric(child.adminUrl, 'sluice_open_connections')).toBe(cap);
      expect(await metric(child.adminUrl, 'sluice_max_connections')).toBe(cap);
      expect(await metric(child.adminUrl, 'sluice_dropped_connections_total')).toBeGreaterThan(0);

      // Headers timeout (2 s, checked every second): the held blocks get 408 and are closed.
      const answers = await Promise.all(flood.filter((c) => !c.closed).map((c) => c.waitFor(/HTTP\/1\.1 \d{3}/, 6_000)));
      expect(answers.length).toBeGreaterThan(0);
      for (const a of answers) expect(a).toMatch(/^HTTP\/1\.1 408 /);
      // Below the cap again, but it was at the cap moments ago: still out for 5 s after the last
      // connection it closed, so that a kubelet probing between two floods does not flap it. A
      // second flood, which its client then drops, makes that moment now rather than at the
      // first flood (3 s back), so that the check below has the whole 5 s, however busy the machine.
      await eventually(async () => expect(await metric(child.adminUrl, 'sluice_open_connections')).toBeLessThan(cap), { timeoutMs: 2_000, intervalMs: 20 });
      const dropped = (await metric(child.adminUrl, 'sluice_dropped_connections_total')) ?? 0;
      flood.push(...(await halfHeaders(child.port, cap + 20)));
      await eventually(async () => expect(await metric(child.adminUrl, 'sluice_dropped_connections_total')).toBeGreaterThan(dropped), { timeoutMs: 2_000, intervalMs: 20 });
      for (const c of flood) c.destroy();
      await eventually(async () => expect(await metric(child.adminUrl, 'sluice_open_connections')).toBeLessThan(cap), { timeoutMs: 2_000, intervalMs: 20 });
      const lately = await fetch(`${child.adminUrl}/readyz`);
      expect(lately.status).toBe(503);
      expect(((await lately.json()) as { checks: { connections?: string } }).checks.connections).toBe('lately at the connection cap');
      await eventually(async () => expect((await fetch(`${child.adminUrl}/readyz`)).status).toBe(200), { timeoutMs: 8_000, intervalMs: 50 });
      const fresh = await post(child.port, '/v1/chat/completions', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, Buffer.from('{"model":"gpt-4o"}'));
      expect(fresh.status).toBe(200);
    } finally {
      for (const c of flood) c.destroy();
      agent.destroy();
      await child.close();
    }
  }, 40_000);

  it('say "sluice is out of sockets" (503 out_of_sockets, logged, readiness false) when descriptors run out toward the relay, instead of blaming the relay', async () => {
    const nofile = 600;
    // A cap set above what the descriptor limit leaves room for: sluice warns, and runs out.
    const child = await startChildSluice({ relayUrl: relay.url, nofile, env: { SLUICE_MAX_CONNECTIONS: '2000' } });
    const flood: RawConnection[] = [];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 });
    try {
      const key = await child.createKey('fds');
      expect((await threeCalls(agent, child.port, key)).map((a) => a.status)).toEqual([200, 200, 200]);

      flood.push(...(await halfHeaders(child.port, 700)));
      await sleep(300);
      const during = await threeCalls(agent, child.port, key);
      const refused = during.filter((a) => a.status !== 200);
      expect(refused.length, JSON.stringify(during.map((a) => a.status))).toBeGreaterThan(0);
      for (const a of refused) {
        expect(a.status).toBe(503);
        expect(a.headers['retry-after']).toBe('1');
        const body = JSON.parse(a.text) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('out_of_sockets');
        expect(body.error.message).toContain('sluice is out of sockets');
      }
      // The log line names sluice, not the relay (log lines are written within 50 ms).
      const logged = (): boolean => child.lines().some((l) => l.level === 50 && typeof l.msg === 'string' && l.msg.includes('sluice is out of sockets'));
      await eventually(() => expect(logged()).toBe(true), { timeoutMs: 2_000, intervalMs: 50 });
      const warning = child.lines().find((l) => typeof l.msg === 'string' && l.msg.includes('leaves no room below the descriptor limit'));
      expect(warning, 'a start-up warning names server.maxConnections').toMatchObject({ level: 40, maxConnections: 2000 });

      // Once descriptors are free again, readiness still says no for a few seconds, and the metric counts it.
      for (const c of flood) c.destroy();
      await sleep(200);
      expect((await fetch(`${child.adminUrl}/readyz`)).status).toBe(503);
      expect(await metric(child.adminUrl, 'sluice_out_of_sockets_total')).toBeGreaterThan(0);
    } finally {
      for (const c of flood) c.destroy();
      agent.destroy();
      await child.close();
    }
  }, 40_000);
});

describe('a refused client keeping its connection', () => {
  // The rest of a small refused body may take as long as headers may (1 s here), not the whole request's 20 s.
  const h = useHarness({ store: 'memory', file: { server: { headersTimeoutSeconds: 1, requestTimeoutSeconds: 20 } } });
  const open = rawConnections();

  it('cannot hold its connection by sending the rest of a small refused body slowly: a wrong key answered 401 is closed once the headers timeout passes without the rest', async () => {
    const started = Date.now();
    const c = await openRaw(
      Number(new URL(h.url).port),
      'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\nContent-Length: 1000\r\n\r\n{"model":',
    );
    open.push(c);
    // A byte now and then, never the whole body.
    const drip = setInterval(() => c.write(' '), 200);
    try {
      expect(finalStatus(await c.waitFor(/HTTP\/1\.1 \d{3}/, 3_000))).toBe(401);
      await c.waitFor(/(?!)/, 10_000);
      expect(c.closed).toBe(true);
      expect(Date.now() - started).toBeLessThan(6_000);
    } finally {
      clearInterval(drip);
    }
  });
});

describe('timeouts', () => {
  const logs = capturedLog();
  const h = useHarness({
    store: 'memory',
    log: logs.log,
    file: { server: { headersTimeoutSeconds: 1, requestTimeoutSeconds: 2 }, upstream: { headersTimeoutSeconds: 1, idleTimeoutSeconds: 2 } },
  });
  let key = '';
  const open = rawConnections();
  beforeAll(async () => {
    key = (await h.createKey('timeouts')).key;
  });
  const port = (): number => Number(new URL(h.url).port);

  it('answers 408 and closes a connection whose headers do not complete within the headers timeout', async () => {
    const c = await openRaw(port(), 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    open.push(c);
    const started = Date.now();
    const text = await c.waitFor(/HTTP\/1\.1 \d{3}[\s\S]*\r\n\r\n/, 5_000);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    // Bounded by the setting (1 s, checked each second), not by the 66 s Node allowed before.
    expect(Date.now() - started).toBeLessThan(4_500);
    await c.waitFor(/$^/, 1_000);
    expect(c.closed).toBe(true);
  });

  it("answers 408 request_timeout in the relay's JSON shape to a body that does not arrive within the request timeout, and forwards nothing", async () => {
    const c = await openRaw(
      port(),
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":`,
    );
    open.push(c);
    const text = await c.waitFor(/\}\}$/, 5_000);
    expect(finalStatus(text)).toBe(408);
    expect(answerJson(text).error).toMatchObject({ code: 'request_timeout', type: 'new_api_error' });
    expect(h.relay.started).toBe(0);
  });

  it('answers 504 upstream_timeout when the relay sends no headers within upstream.headersTimeoutSeconds and aborts the relay request; silences inside a stream shorter than upstream.idleTimeoutSeconds are not bounded', async () => {
    h.relay.behave((r) => r.url === '/v1/chat/completions' && !r.body.includes('"stream"'), { delayMs: 10_000 });
    const started = Date.now();
    const r = await post(port(), '/v1/chat/completions', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, Buffer.from('{"model":"gpt-4o"}'));
    expect(r.status).toBe(504);
    expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'upstream_timeout', type: 'new_api_error' } });
    // Bounded by the setting (1 s, swept each second), well before the relay's 10 s.
    expect(Date.now() - started).toBeLessThan(6_000);
    // The relay sees its request cut, so it stops working on it.
    await h.relay.waitFor((rs) => rs.some((x) => x.closedEarly), 3_000);

    // A stream whose events are further apart than the headers' bound, and closer than the silences' bound, runs to its end.
    h.relay.behave((r) => r.body.includes('"stream"'), { sseEvents: 2, sseIntervalMs: 1_100 });
    const s = await post(port(), '/v1/chat/completions', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, Buffer.from('{"model":"gpt-4o","stream":true}'));
    expect(s.status).toBe(200);
    expect([...s.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('')).toBe(STANDIN_TEXT);
    expect(s.text).toContain('data: [DONE]');
  });

  it('cuts a stream whose relay goes silent for upstream.idleTimeoutSeconds: the client sees the stream end unfinished, the relay its request closed; logged and counted as answer_stalled, reason relay_silent', async () => {
    h.relay.behave((r) => r.body.includes('"stream"'), { sseEvents: 2, sseIntervalMs: 30_000 });
    logs.clear();
    const started = Date.now();
    const c = await openRaw(
      port(),
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 32\r\n\r\n{"model":"gpt-4o","stream":true}`,
    );
    open.push(c);
    expect(finalStatus(await c.waitFor(/"content"/, 3_000))).toBe(200);
    await c.waitFor(/(?!)/, 6_000);
    expect(c.closed).toBe(true);
    // Bound 2 s, swept each second: cut after 2 to 3 s of silence, long before the relay's next event.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_990);
    expect(Date.now() - started).toBeLessThan(5_500);
    expect(c.text()).not.toContain('[DONE]');
    await h.relay.waitFor((rs) => rs.some((x) => x.closedEarly), 3_000);
    await eventually(() => expect(logs.requests().map((l) => [l.decision, l.reason, l.status])).toEqual([['answer_stalled', 'relay_silent', 200]]), {
      timeoutMs: 2_000,
      intervalMs: 20,
    });
    expect(logs.lines.find((l) => l.msg === 'answer cut: none of its bytes moved within upstream.idleTimeoutSeconds')).toMatchObject({
      level: 40,
      reason: 'relay_silent',
      seconds: 2,
    });
    expect(metricValue(await metricsText(h), 'sluice_requests_total', { family: 'chat', outcome: 'answer_stalled' })).toBe(1);
  });
});

describe('Expect: 100-continue', () => {
  const h = useHarness({ store: 'memory', file: { ipLimits: [{ name: 'once', paths: ['/api/*'], limit: 1, windowSeconds: 600 }] } });
  let key = '';
  const open = rawConnections();
  beforeAll(async () => {
    key = (await h.createKey('expect')).key;
  });
  const port = (): number => Number(new URL(h.url).port);
  const head = (path: string, auth: string, length: number): string =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;

  async function refusedWithoutInvitation(path: string, auth: string, length: number): Promise<string> {
    const c = await openRaw(port(), head(path, auth, length));
    open.push(c);
    const text = await c.waitFor(/\r\n\r\n/, 3_000);
    await c.waitFor(/$^/, 300);
    // Answered although not one byte of the body was sent: nothing was read, nothing invited.
    expect(text).not.toMatch(/100 Continue/i);
    return text;
  }

  it('answers 401 to a 100 MB upload with a bad key without inviting the body; a good key is invited, and its body forwarded without the Expect field', async () => {
    const text = await refusedWithoutInvitation('/v1/chat/completions', 'sk-wrong-key-0123456789abcdef', 100_000_000);
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text).toMatch(/connection: close/i);
    expect(h.relay.started).toBe(0);

    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    const c = await openRaw(port(), head('/v1/chat/completions', key, Buffer.byteLength(body)));
    open.push(c);
    expect(await c.waitFor(/100 Continue\r\n\r\n/, 3_000)).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    expect(h.relay.started).toBe(0);
    c.write(body);
    expect(finalStatus(await c.waitFor(/"usage"/, 3_000))).toBe(200);
    await h.relay.waitFor((r) => r.length === 1);
    expect(h.relay.requests[0]!.body.toString()).toBe(body);
    expect(h.relay.requests[0]!.headers.expect).toBeUndefined();
  });

  it('answers 413 to a declared size over maxBodyBytes, with a good key, without inviting the body', async () => {
    const text = await refusedWithoutInvitation('/v1/chat/completions', key, 100_000_000);
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(h.relay.started).toBe(0);
  });

  it("answers the per-IP limit's 429 without inviting the body", async () => {
    const first = await openRaw(port(), head('/api/thing', key, 2));
    open.push(first);
    expect(await first.waitFor(/100 Continue/, 3_000)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    const text = await refusedWithoutInvitation('/api/thing', key, 2);
    expect(text).toMatch(/^HTTP\/1\.1 429 /);
  });
});
