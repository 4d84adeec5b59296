/**
 * A relay that misbehaves in ways Node's HTTP parser lets through (a helper's probe, issue 28): a
 * control character in its reason phrase (writeHead threw, and the process ended), an answer
 * before it reads the request body after which it reads nothing (the body's bytes stayed in
 * sluice's write queue, its connection held, forever), an endless body behind a 429 that sluice
 * replaces (sluice read it without end), and a stream whose media type is not in lower case (its
 * headers were held until its first byte). The relay here is a raw TCP server writing exactly
 * those bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { eventually } from '../support/time.js';
import { openRaw, startRawRelay, type RawRelay } from './raw.js';

const EVENT = 'data: {"a":1}\n\n';
const chunked = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

type Mode = 'bad-reason' | 'bad-reason-stream' | 'early-answer' | 'endless-429' | 'short-429' | 'capital-stream' | 'ok';

type HostileRelay = RawRelay<Mode>;

function hostileRelay(): Promise<HostileRelay> {
  return startRawRelay<Mode>('ok', (s, relay, stopReading) => {
    switch (relay.mode) {
      case 'bad-reason':
        relay.write(s, 'HTTP/1.1 200 O\x01K\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
        break;
      case 'bad-reason-stream':
        relay.write(s, 'HTTP/1.1 200 \x1b[31mOK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
        relay.write(s, `${chunked(EVENT)}0\r\n\r\n`);
        break;
      case 'early-answer':
        // Answers at once, then reads nothing for a while (a hung relay): the body stays unsent.
        // Reading again, it finds the connection closed, or reads the rest of the body and keeps it open.
        relay.write(s, 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
        stopReading();
        s.pause();
        setTimeout(() => s.on('data', () => {}).resume(), 500);
        break;
      case 'endless-429': {
        relay.write(s, 'HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
        const chunk = `4000\r\n${'x'.repeat(0x4000)}\r\n`;
        const more = (): void => {
          while (!s.destroyed && relay.write(s, chunk));
          if (!s.destroyed) s.once('drain', more);
        };
        more();
        break;
      }
      case 'short-429':
        relay.write(s, 'HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
        break;
      case 'capital-stream':
        // Headers now, the first event only after a long think.
        relay.write(s, 'HTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n');
        setTimeout(() => {
          if (!s.destroyed) relay.write(s, `${chunked(EVENT)}0\r\n\r\n`);
        }, 1500);
        break;
      default:
        relay.write(s, 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
    }
  });
}

describe('a relay that misbehaves where Node parses it', () => {
  let relay: HostileRelay;
  let h: Harness;
  let key = '';
  const logs = capturedLog();
  beforeAll(async () => {
    relay = await hostileRelay();
    h = await startHarness({ store: 'memory', env: { SLUICE_UPSTREAM_URL: relay.url }, log: logs.log });
    key = (await h.createKey('misbehaving')).key;
  });
  afterAll(async () => {
    await h?.close();
    await relay?.close();
  });

  const chat = (model = 'gpt-4o', body?: string) =>
    request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: body ?? JSON.stringify({ model, messages: [] }) });

  /** The next ordinary call is served: the process is up. */
  async function stillServes(): Promise<void> {
    relay.mode = 'ok';
    const r = await chat();
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"ok":true}');
  }

  it.each(['bad-reason', 'bad-reason-stream'] as const)(
    '(%s) a control character in the reason phrase: the answer passes whole with its status, and sluice keeps serving',
    async (mode) => {
      relay.mode = mode;
      const r = await chat();
      expect(r.status).toBe(200);
      expect(r.text).toBe(mode === 'bad-reason' ? '{"ok":true}' : 'data: {"a":1}\n\n');
      await stillServes();
    },
  );

  it('an answer before the body, then nothing read: the client has the answer, and the relay connection is closed', async () => {
    relay.mode = 'early-answer';
    const closed = relay.closed;
    // Larger than the sockets' buffers can take, so most of it is still waiting when the answer comes.
    const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(16 * 1024 * 1024) }] });
    const r = await chat('gpt-4o', body);
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"ok":true}');
    await eventually(() => expect(relay.closed).toBeGreaterThan(closed), { timeoutMs: 2000, intervalMs: 20, what: 'the relay connection closed' });
    expect(metricValue(await metricsText(h), 'sluice_body_bytes')).toBe(0);
    await stillServes();
  });

  it("an endless body behind a 429 sluice replaces: the client gets sluice's 402, and sluice stops reading at once", async () => {
    relay.mode = 'endless-429';
    const closed = relay.closed;
    const r = await chat('vend-flash-free');
    expect(r.status).toBe(402);
    expect(JSON.parse(r.text).error.code).toBe('free_tier_exhausted');
    await eventually(() => expect(relay.closed).toBeGreaterThan(closed), { timeoutMs: 2000, intervalMs: 20, what: 'the relay connection closed' });
    // Nothing more is read: what the relay managed to write stays what the socket buffers held.
    const written = relay.written;
    await new Promise((r) => setTimeout(r, 300));
    expect(relay.written).toBe(written);
    expect(written).toBeLessThan(64 * 1024 * 1024);
    await stillServes();
  });

  it('a short 429 sluice replaces: read to its end, and its connection serves the next calls', async () => {
    await stillServes();
    relay.mode = 'short-429';
    const opened = relay.opened;
    for (let i = 0; i < 3; i++) {
      const r = await chat('vend-flash-free');
      expect(r.status).toBe(402);
    }
    await stillServes();
    expect(relay.opened).toBe(opened);
  });

  it('a stream whose media type is not in lower case: its headers reach the client at once, and it is counted as a stream', async () => {
    relay.mode = 'capital-stream';
    const body = '{"model":"gpt-4o"}';
    const t0 = performance.now();
    const raw = await openRaw(
      Number(new URL(h.url).port),
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    const head = await raw.waitFor(/\r\n\r\n/, 1000);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head).not.toContain('data:');
    expect(metricValue(await metricsText(h), 'sluice_open_streams')).toBe(1);
    expect(await raw.waitFor(/data: \{"a":1\}/, 3000)).toContain('data: {"a":1}');
    raw.destroy();
    await stillServes();
  });
});
