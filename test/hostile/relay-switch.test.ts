/**
 * Hostile traffic, round two (issue 25, item 5): a relay that answers `101 Switching Protocols` to
 * an ordinary request. Node's HTTP client then reports neither a response nor an error, and the
 * client waited for upstream.headersTimeoutSeconds (600 s). It gets 502 at once now. The relay here
 * is a raw TCP server writing exactly those bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { eventually, sleep, within } from '../support/time.js';
import { startRawRelay, type RawRelay } from './raw.js';

type Mode = 'switch' | 'bare-switch' | 'status-99' | 'status-0' | 'ok';

/** A relay that answers each request by `mode`, and counts its connections closed. */
function switchingRelay(): Promise<RawRelay<Mode>> {
  return startRawRelay<Mode>('switch', (s, relay) => {
    if (relay.mode === 'switch') relay.write(s, 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    else if (relay.mode === 'bare-switch') relay.write(s, 'HTTP/1.1 101 Switching Protocols\r\n\r\n');
    // A status HTTP does not allow: Node's parser reads it, and writeHead would throw on it.
    else if (relay.mode === 'status-99') relay.write(s, 'HTTP/1.1 099 Weird\r\ncontent-length: 0\r\n\r\n');
    else if (relay.mode === 'status-0') relay.write(s, 'HTTP/1.1 000 Zero\r\ncontent-length: 0\r\n\r\n');
    else relay.write(s, 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
  });
}

describe('a relay that answers 101 Switching Protocols, or a status below 100, to an ordinary request', () => {
  let relay: RawRelay<Mode>;
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
