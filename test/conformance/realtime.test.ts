/**
 * Conformance: the official `openai` SDK's Realtime clients, over WebSocket, with their base URL
 * pointed at sluice behind a TLS terminator (they always open `wss://`, as through the ingress),
 * the relay stand-in's realtime session behind it. Both ways a client carries its key: the Node
 * client's `Authorization`, and the browser client's `Sec-WebSocket-Protocol` entry
 * `openai-insecure-api-key.<key>` (its WebSocket can set no other field).
 *
 * WebSocket upgrades need a Node whose HTTP server takes `shouldUpgradeCallback` (src/http/upgrade.ts):
 * skipped on Node 20.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { OpenAIRealtimeWebSocket } from 'openai/realtime/websocket';
import { WebSocket as WsWebSocket } from 'ws';
import { upgradesSupported } from '../../src/http/upgrade.js';
import { keyBody } from '../../src/auth/keys.js';
import { useHarness, type Harness } from '../support/harness.js';
import { capturedLog } from '../support/log.js';
import { CA, startTlsTerminator, type TlsTerminator } from '../support/tls.js';
import { eventually } from '../support/time.js';
import { lastRequest } from '../support/helpers.js';
import { BAD_KEY, FREE, PAID, freshKey } from './support.js';

/** Realtime's server events as these tests read them. */
interface ServerEvent {
  type: string;
  session?: { model?: string; instructions?: string };
}

/** Emits the server's events in order; `next(type)` resolves with the first not yet taken of that type. */
function eventsOf(rt: { on(event: 'event', l: (e: ServerEvent) => void): unknown; on(event: 'error', l: (e: Error) => void): unknown }): {
  next(type: string): Promise<ServerEvent>;
  errors: Error[];
} {
  const seen: ServerEvent[] = [];
  const waiting: { type: string; resolve: (e: ServerEvent) => void }[] = [];
  const errors: Error[] = [];
  rt.on('event', (e) => {
    const i = waiting.findIndex((w) => w.type === e.type);
    if (i === -1) seen.push(e);
    else waiting.splice(i, 1)[0]!.resolve(e);
  });
  rt.on('error', (e) => void errors.push(e));
  return {
    errors,
    next: (type) =>
      new Promise((resolve) => {
        const i = seen.findIndex((e) => e.type === type);
        if (i !== -1) resolve(seen.splice(i, 1)[0]!);
        else waiting.push({ type, resolve });
      }),
  };
}

/** A browser's WebSocket, as the browser client opens it, that trusts the terminator's certificate. */
class TrustingWebSocket extends WsWebSocket {
  constructor(url: string, protocols?: string | string[]) {
    super(url, protocols, { ca: CA });
  }
}

describe.skipIf(!upgradesSupported)('openai SDK realtime through sluice', () => {
  const log = capturedLog();
  const h: Harness = useHarness({ store: 'redis', log: log.log, file: { freeTier: { perMinute: 2 } } });
  let tls: TlsTerminator;
  let key: string;
  const client = (k: string): OpenAI => new OpenAI({ apiKey: k, baseURL: `${tls.url.replace('127.0.0.1', 'localhost')}/v1` });
  const accessLineOf = (path: string): Record<string, unknown> | undefined => log.requests().find((l) => String(l.path) === path);
  const realGlobalWebSocket = globalThis.WebSocket;

  beforeAll(async () => {
    tls = await startTlsTerminator(Number(new URL(h.url).port));
    key = await freshKey(h, 'rt');
    (globalThis as { WebSocket: unknown }).WebSocket = TrustingWebSocket;
  });
  afterAll(async () => {
    (globalThis as { WebSocket: unknown }).WebSocket = realGlobalWebSocket;
    await tls.close();
  });

  it('the Node client (`Authorization`): a session opens, events go both ways, and its end is logged with status 101', async () => {
    log.clear();
    const rt = new OpenAIRealtimeWS({ model: PAID, options: { ca: CA } }, client(key));
    const events = eventsOf(rt);
    const created = await events.next('session.created');
    expect(created.session?.model).toBe(PAID);
    rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'be brief' } });
    expect((await events.next('session.updated')).session?.instructions).toBe('be brief');

    const r = lastRequest(h.relay);
    expect(r.url).toBe(`/v1/realtime?model=${PAID}`);
    expect(r.headers.authorization).toBe(`Bearer sk-${keyBody(key)}`);
    expect(r.key).toBe(`sk-${keyBody(key)}`);
    expect(r.model).toBe(PAID);
    expect(h.relay.webSockets).toBe(1);
    // Open, it has no access line yet: it comes when the session ends.
    expect(accessLineOf('/v1/realtime')).toBeUndefined();

    rt.close();
    await eventually(() => h.relay.webSockets === 0, { what: 'the relay to see the session end' });
    const line = await eventually(() => accessLineOf('/v1/realtime') ?? false, { what: 'the access line' });
    expect(line).toMatchObject({ method: 'GET', decision: 'admitted', status: 101, model: PAID, freeTier: false });
    expect(events.errors).toEqual([]);
  });

  it('the browser client (`openai-insecure-api-key.<key>`): the relay reads the key sluice authenticated, and `realtime` is agreed', async () => {
    const other = await freshKey(h, 'rt-browser');
    const rt = new OpenAIRealtimeWebSocket({ model: PAID, dangerouslyAllowBrowser: true }, client(other));
    const events = eventsOf(rt);
    await events.next('session.created');
    expect(rt.socket.protocol).toBe('realtime');
    const r = lastRequest(h.relay);
    expect(r.headers['sec-websocket-protocol']).toBe(`realtime, openai-insecure-api-key.sk-${keyBody(other)}`);
    expect(r.key).toBe(`sk-${keyBody(other)}`);
    rt.send({ type: 'input_audio_buffer.clear' });
    expect(await events.next('standin.echo')).toMatchObject({ received: JSON.stringify({ type: 'input_audio_buffer.clear' }) });
    rt.close();
    await eventually(() => h.relay.webSockets === 0);
  });

  it('a wrong key, in either place, gets the contract 401 before any switch, and the relay sees nothing', async () => {
    const started = h.relay.started;
    for (const open of [
      () => new OpenAIRealtimeWS({ model: PAID, options: { ca: CA } }, client(BAD_KEY)),
      () => new OpenAIRealtimeWebSocket({ model: PAID, dangerouslyAllowBrowser: true }, client(BAD_KEY)),
    ]) {
      const rt = open();
      const failed = new Promise<{ status: number; body: string }>((resolve) => {
        (rt.socket as WsWebSocket).on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
      });
      rt.on('error', () => undefined);
      const { status, body } = await failed;
      expect(status).toBe(401);
      expect(JSON.parse(body)).toMatchObject({ error: { code: '', type: 'new_api_error' } });
    }
    expect(h.relay.started).toBe(started);
  });

  it('a free realtime model counts against the free tier: the third session in a minute gets 429 with Retry-After', async () => {
    const user = await freshKey(h, 'rt-free');
    const open = async (): Promise<{ status: number; retryAfter?: string }> => {
      const rt = new OpenAIRealtimeWS({ model: FREE, options: { ca: CA } }, client(user));
      rt.on('error', () => undefined);
      return new Promise((resolve) => {
        rt.socket.on('open', () => {
          rt.close();
          resolve({ status: 101 });
        });
        rt.socket.on('unexpected-response', (_req, res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
        });
      });
    };
    const [first, second, third] = [await open(), await open(), await open()];
    expect([first.status, second.status, third.status]).toEqual([101, 101, 429]);
    expect(third.retryAfter).toMatch(/^\d+$/);
    expect(h.relay.requests.filter((r) => r.model === FREE && r.key === `sk-${keyBody(user)}`)).toHaveLength(2);
  });
});
