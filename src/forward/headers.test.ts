import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { connectionNamesJudgedField, filterResponseHeaders, prepareRequestHeaders } from './headers.js';

const prepared = (headers: IncomingHttpHeaders, key: string | null, extra: { googKey?: boolean; webSocket?: boolean } = {}): IncomingHttpHeaders => {
  const h = { ...headers };
  prepareRequestHeaders(h, { key, clientIp: '203.0.113.9', bodyLength: null, ...extra });
  return h;
};

describe('prepareRequestHeaders: the key toward the relay', () => {
  it('sends the key as Authorization: Bearer', () => {
    expect(prepared({ authorization: 'Bearer sk-client' }, 'sk-client').authorization).toBe('Bearer sk-client');
    expect(prepared({ authorization: 'Bearer sk-client' }, 'sk-relay-credential').authorization).toBe('Bearer sk-relay-credential');
  });

  it('keeps the key header the client sent, holding the key the relay must see (new-api chooses formats by it)', () => {
    const h = prepared({ 'x-api-key': 'client-key', 'anthropic-version': '2023-06-01' }, 'sk-client-key');
    expect(h).toMatchObject({ authorization: 'Bearer sk-client-key', 'x-api-key': 'sk-client-key', 'anthropic-version': '2023-06-01' });
    expect(prepared({ 'x-goog-api-key': 'sk-client' }, 'sk-relay')).toMatchObject({ 'x-goog-api-key': 'sk-relay' });
  });

  it('never lets a second key the client put beside the authenticated one reach the relay', () => {
    const h = prepared({ authorization: 'Bearer sk-mine', 'x-api-key': 'sk-someone-else', 'x-goog-api-key': 'sk-third' }, 'sk-mine');
    expect(h).toMatchObject({ authorization: 'Bearer sk-mine', 'x-api-key': 'sk-mine', 'x-goog-api-key': 'sk-mine' });
  });

  it('keeps an empty key header empty: the relay treats it as absent, and so chooses the same format', () => {
    expect(prepared({ authorization: 'Bearer sk-a', 'x-api-key': '' }, 'sk-a')['x-api-key']).toBe('');
  });

  it('adds x-goog-api-key for a removed ?key= that only chose the Gemini format', () => {
    expect(prepared({ authorization: 'Bearer sk-a' }, 'sk-a', { googKey: true })['x-goog-api-key']).toBe('sk-a');
    expect(prepared({ authorization: 'Bearer sk-a' }, 'sk-a')['x-goog-api-key']).toBeUndefined();
  });

  it('on a WebSocket upgrade, asks the relay to switch and keeps Sec-WebSocket-Protocol, its key entry holding the key the relay must see', () => {
    const h = prepared(
      {
        authorization: 'Bearer sk-a',
        connection: 'keep-alive, Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
        'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-a, openai-beta.realtime-v1',
      },
      'sk-relay',
      { webSocket: true },
    );
    expect(h).toMatchObject({
      authorization: 'Bearer sk-relay',
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-version': '13',
      'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-relay, openai-beta.realtime-v1',
    });
    // No entry named a key: one is added (an older new-api reads the whole value as the key when none does).
    expect(prepared({ 'sec-websocket-protocol': 'realtime', upgrade: 'websocket', connection: 'Upgrade' }, 'sk-relay', { webSocket: true })['sec-websocket-protocol']).toBe(
      'realtime, openai-insecure-api-key.sk-relay',
    );
    // Not an upgrade: the switch is never asked for.
    const plain = prepared({ connection: 'Upgrade', upgrade: 'h2c', 'sec-websocket-protocol': 'realtime' }, 'sk-a');
    expect([plain.connection, plain.upgrade, plain['sec-websocket-protocol']]).toEqual([undefined, undefined, undefined]);
  });

  it('drops the headers new-api would read another key from: Sec-WebSocket-Protocol, mj-api-secret', () => {
    const h = prepared({ authorization: 'Bearer sk-a', 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-other', 'mj-api-secret': 'sk-other' }, 'sk-a');
    expect(h['sec-websocket-protocol']).toBeUndefined();
    expect(h['mj-api-secret']).toBeUndefined();
  });

  it('forwards a call without a key (a CORS preflight) with no key header at all', () => {
    const h = prepared({ authorization: 'Bearer sk-x', 'x-api-key': 'k', 'x-goog-api-key': 'k', origin: 'https://app.example' }, null);
    expect(h.authorization).toBeUndefined();
    expect(h['x-api-key']).toBeUndefined();
    expect(h['x-goog-api-key']).toBeUndefined();
    expect(h.origin).toBe('https://app.example');
  });

  it('sets X-Forwarded-For to the decided address and drops the client-chosen ones', () => {
    const h = prepared({ 'x-forwarded-for': '1.2.3.4', 'x-real-ip': '1.2.3.4', forwarded: 'for=1.2.3.4' }, 'sk-a');
    expect(h['x-forwarded-for']).toBe('203.0.113.9');
    expect(h['x-real-ip']).toBeUndefined();
    expect(h.forwarded).toBeUndefined();
  });
});

describe('filterResponseHeaders', () => {
  it('keeps the relay CORS headers as they are', () => {
    const raw = ['Access-Control-Allow-Origin', '*', 'Access-Control-Allow-Credentials', 'true', 'Connection', 'keep-alive'];
    expect(filterResponseHeaders(raw)).toEqual(['Access-Control-Allow-Origin', '*', 'Access-Control-Allow-Credentials', 'true']);
  });
});

describe('connectionNamesJudgedField', () => {
  it('finds a field sluice judges by among the Connection tokens, in any case, in one header or several', () => {
    expect(connectionNamesJudgedField('close, Content-Type')).toBe('content-type');
    expect(connectionNamesJudgedField(['keep-alive', ' X-API-Key '])).toBe('x-api-key');
    expect(connectionNamesJudgedField('te, host')).toBe('host');
  });

  it('finds none in the usual values or in fields sluice neither reads nor rewrites', () => {
    for (const v of [undefined, 'keep-alive', 'close', 'Keep-Alive', 'upgrade', 'te, trailers', 'x-trace', 'close, anthropic-version', '']) {
      expect(connectionNamesJudgedField(v)).toBeNull();
    }
  });
});
