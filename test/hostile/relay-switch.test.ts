/**
 * Hostile traffic, round two (issue 25, item 5): a relay that answers `101 Switching Protocols` to
 * an ordinary request. Node's HTTP client then reports neither a response nor an error, and the
 * client waited for upstream.headersTimeoutSeconds (600 s). It gets 502 at once now. The relay here
 * is a raw TCP server writing exactly those bytes.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { eventually, sleep, within } from '../support/time.js';

type Mode = 'switch' | 'bare-switch' | 'status-99' | 'status-0' | 'ok';

/** A relay that answers each request by `mode`, and records how many of its connections closed. */
async function switchingRelay(): Promise<{ url: string; mode: Mode; closed: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const relay = {
    url: '',
    mode: 'switch' as Mode,
    closed: 0,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => {
      sockets.delete(s);
      relay.closed++;
    });
    let head = '';
    s.on('data', (b: Buffer) => {
      head += b.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      head = '';
      if (relay.mode === 'switch') s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      else if (relay.mode === 'bare-switch') s.write('HTTP/1.1 101 Switching Protocols\r\n\r\n');
      // A status HTTP does not allow: Node's parser reads it, and writeHead would throw on it.
      else if (relay.mode === 'status-99') s.write('HTTP/1.1 099 Weird\r\ncontent-length: 0\r\n\r\n');
      else if (relay.mode === 'status-0') s.write('HTTP/1.1 000 Zero\r\ncontent-length: 0\r\n\r\n');
      else s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  relay.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return relay;
}

describe('a relay that answers 101 Switching Protocols, or a status below 100, to an ordinary request', () => {
  let relay: Awaited<ReturnType<typeof switchingRelay>>;
  let h: Harness;
  let key = '';
  const logs = capturedLog();
  beforeAll(async () => {
    relay = await switchingRelay();
    h = await startHarness({ store: 'memory', env: { SLUICE_UPSTREAM_URL: relay.url }, log: logs.log });
    key = (await h.createKey('switch')).key;
  });
  afterAll(async () => {
    await h?.close();
    await relay?.close();
  });

  it.each(['switch', 'bare-switch', 'status-99', 'status-0'] as const)(
    '(%s) gets 502 upstream_unreachable within a second, logged with the reason, and the relay connection closed',
    async (mode) => {
      relay.mode = mode;
      const closedBefore = relay.closed;
      const t0 = performance.now();
      const answered = await within(
        3000,
        request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"gpt-4o","messages":[]}' }),
      );
      const ms = performance.now() - t0;
      expect(answered, 'an answer within 3 s').not.toBeNull();
      const r = answered!;
      expect(r.status, r.text).toBe(502);
      expect(ms).toBeLessThan(1000);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'upstream_unreachable', type: 'new_api_error' } });
      expect(r.headers['x-oneapi-request-id']).toBeDefined();
      await eventually(() => expect(relay.closed).toBeGreaterThan(closedBefore), { timeoutMs: 2000, intervalMs: 20 });
      await sleep(100);
      const lines = logs.lines;
      const reqId = r.headers['x-oneapi-request-id'];
      expect(lines.find((l) => l.reqId === reqId && l.msg === 'relay request failed')).toMatchObject({
        err: expect.stringContaining(mode.startsWith('status') ? 'which HTTP does not allow' : '101 Switching Protocols') as string,
      });
      expect(lines.find((l) => l.reqId === reqId && l.msg === 'request')).toMatchObject({ decision: 'upstream_error', status: 502 });

      // The relay behaving again, the next call goes through on a fresh connection.
      relay.mode = 'ok';
      const next = await within(3000, request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"gpt-4o"}' }));
      expect(next?.status).toBe(200);
    },
  );

  it('counts them as upstream_error', async () => {
    expect(metricValue(await metricsText(h), 'sluice_requests_total', { family: 'chat', outcome: 'upstream_error' })).toBe(4);
  });
});
