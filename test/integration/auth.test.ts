import type { OutgoingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, STORE_KINDS, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';

const AUTH_401 = /^\{"error":\{"code":"","message":"([^"]+) \(request id: ([A-Za-z0-9]+)\)","type":"new_api_error"\}\}$/;

interface Endpoint {
  name: string;
  method: string;
  path: string;
  body?: string;
  xApiKey: boolean;
  xGoog: boolean;
}

const ENDPOINTS: Endpoint[] = [
  { name: 'chat', method: 'POST', path: '/v1/chat/completions', body: '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}', xApiKey: false, xGoog: false },
  { name: 'responses', method: 'POST', path: '/v1/responses', body: '{"model":"gpt-4o","input":"hi"}', xApiKey: false, xGoog: false },
  {
    name: 'messages',
    method: 'POST',
    path: '/v1/messages',
    body: '{"model":"claude-haiku-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}',
    xApiKey: true,
    xGoog: false,
  },
  { name: 'models', method: 'GET', path: '/v1/models', xApiKey: true, xGoog: false },
  { name: 'model by id', method: 'GET', path: '/v1/models/gpt-4o', xApiKey: true, xGoog: false },
  { name: 'gemini', method: 'POST', path: '/v1beta/models/gemini-2.0-flash:generateContent', body: '{"contents":[{"parts":[{"text":"hi"}]}]}', xApiKey: false, xGoog: true },
  { name: 'usage', method: 'GET', path: '/api/usage/token/', xApiKey: false, xGoog: false },
  { name: 'log', method: 'GET', path: '/api/log/token', xApiKey: false, xGoog: false },
  { name: 'dashboard', method: 'GET', path: '/v1/dashboard/billing/usage', xApiKey: false, xGoog: false },
];

describe.each(STORE_KINDS)('authentication on the %s store', (kind) => {
  let h: Harness;
  let key: string;
  let otherUserKey: string;

  beforeAll(async () => {
    // Query endpoints are IP-limited to 20 per 20 min; this suite sends more than that.
    h = await startHarness({ store: kind, file: { ipLimits: [] } });
    key = (await h.createKey('alice')).key;
    otherUserKey = (await h.createKey('bob')).key;
  });
  afterAll(() => h.close());

  const send = (e: Endpoint, headers: OutgoingHttpHeaders, pathSuffix = '') =>
    request(h.url, e.method, e.path + pathSuffix, {
      headers: { ...(e.body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: e.body,
    });

  describe.each(ENDPOINTS)('$name ($method $path)', (e) => {
    it('accepts Authorization: Bearer with the key, with or without sk-, any scheme case', async () => {
      for (const value of [`Bearer ${key}`, `bearer ${key.slice(3)}`, `BEARER ${key}`]) {
        const r = await send(e, { authorization: value });
        expect(r.status, value.slice(0, 7)).toBe(200);
      }
    });

    it(`${e.xApiKey ? 'accepts' : 'ignores'} x-api-key alone`, async () => {
      const r = await send(e, { 'x-api-key': key });
      expect(r.status).toBe(e.xApiKey ? 200 : 401);
    });

    it(`${e.xGoog ? 'accepts' : 'ignores'} x-goog-api-key alone`, async () => {
      const r = await send(e, { 'x-goog-api-key': key.slice(3) });
      expect(r.status).toBe(e.xGoog ? 200 : 401);
    });

    it('answers 401 without any key header, and never takes a key from the query string', async () => {
      expect((await send(e, {})).status).toBe(401);
      expect((await send(e, {}, `?key=${key}`)).status).toBe(401);
    });

    it('answers 401 for a wrong, incomplete, empty or non-Bearer key', async () => {
      for (const value of [`Bearer sk-wrong${key.slice(8)}`, `Bearer ${key.slice(0, -1)}`, 'Bearer ', 'Bearer sk-', `Basic ${key}`, key]) {
        expect((await send(e, { authorization: value })).status, value.slice(0, 12)).toBe(401);
      }
    });

    it('answers 401 when a counting header holds a wrong key beside a valid one', async () => {
      const bad = `sk-nope${key.slice(7)}`;
      if (e.xApiKey) expect((await send(e, { authorization: `Bearer ${key}`, 'x-api-key': bad })).status).toBe(401);
      if (e.xGoog) expect((await send(e, { authorization: `Bearer ${key}`, 'x-goog-api-key': bad })).status).toBe(401);
      expect((await send(e, { authorization: `Bearer ${bad}`, ...(e.xApiKey ? { 'x-api-key': key } : {}), ...(e.xGoog ? { 'x-goog-api-key': key } : {}) })).status).toBe(401);
      // A repeated key header is ambiguous, whichever line holds the valid key: Node would keep only
      // the first Authorization line, so a wrong second one must not go unseen.
      for (const pair of [
        [`Bearer ${key}`, `Bearer ${bad}`],
        [`Bearer ${bad}`, `Bearer ${key}`],
        [`Bearer ${key}`, `Bearer ${key}`],
      ]) {
        expect((await send(e, Object.fromEntries([['authorization', pair]]))).status, pair.map((v) => v.slice(7, 12)).join(' then ')).toBe(401);
      }
      if (e.xApiKey) expect((await send(e, { 'x-api-key': [key, bad] })).status).toBe(401);
      // A header that does not count on this path is ignored, whatever it holds.
      if (!e.xApiKey) expect((await send(e, { authorization: `Bearer ${key}`, 'x-api-key': bad })).status).toBe(200);
    });
  });

  it('answers the contract 401 body byte for byte, with a fresh request id in the body and the header', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: 'Bearer sk-invalid' }, body: '{}' });
      expect(r.status).toBe(401);
      expect(r.headers['content-type']).toBe('application/json');
      const m = AUTH_401.exec(r.text);
      expect(m, r.text).not.toBeNull();
      const [, message, id] = m!;
      expect(message).toMatch(/[\u4e00-\u9fff]/); // Chinese text
      expect(message).toContain('认证');
      expect(r.headers['x-oneapi-request-id']).toBe(id);
      ids.add(id!);
    }
    expect(ids.size).toBe(3);
    expect(h.relay.requests.filter((q) => q.headers.authorization === 'Bearer sk-invalid')).toHaveLength(0);
  });

  it('forwards the client key as Authorization: Bearer sk-<key>, and in the key header the client used', async () => {
    h.relay.reset();
    await request(h.url, 'POST', '/v1/messages', {
      headers: { 'x-api-key': key.slice(3), 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: '{"model":"claude-haiku-4-5","max_tokens":5,"messages":[]}',
    });
    await request(h.url, 'POST', '/v1beta/models/gemini-2.0-flash:generateContent?key=abc&alt=json', {
      headers: { 'x-goog-api-key': key },
      body: '{}',
    });
    const [m, g] = h.relay.requests;
    expect(m!.headers.authorization).toBe(`Bearer ${key}`);
    // The relay chooses its answer's format by the key header (src/forward/headers.ts): it stays, holding the key in wire form.
    expect(m!.headers['x-api-key']).toBe(key);
    expect(m!.headers['anthropic-version']).toBe('2023-06-01');
    expect(g!.headers.authorization).toBe(`Bearer ${key}`);
    expect(g!.headers['x-goog-api-key']).toBe(key);
    // A key in the query could override the header the relay reads; it is removed, other parameters pass.
    expect(g!.url).toBe('/v1beta/models/gemini-2.0-flash:generateContent?alt=json');
  });

  it('refuses keys of two different users in one request', async () => {
    const r = await request(h.url, 'POST', '/v1/messages', {
      headers: { authorization: `Bearer ${key}`, 'x-api-key': otherUserKey },
      body: '{}',
    });
    expect(r.status).toBe(401);
  });

  it('stops accepting a key as soon as it is deleted', async () => {
    const k = await h.createKey('carol');
    const ok = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${k.key}` } });
    expect(ok.status).toBe(200);
    const del = await fetch(`${h.adminUrl}/admin/keys/${k.id}`, { method: 'DELETE', headers: { authorization: 'Bearer test-admin-token-0123456789' } });
    expect(del.status).toBe(204);
    const after = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${k.key}` } });
    expect(after.status).toBe(401);
  });
});
