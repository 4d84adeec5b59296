/**
 * Answering as the relay does (issue #17, items 8 and 9), replayed against a running sluice and
 * the relay stand-in, which answers as new-api does: a call through sluice gets what the same call
 * straight to the relay gets (CORS preflights, list formats chosen by key headers), and the relay
 * only ever authenticates the key sluice authenticated.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startHarness, useHarness, type Harness } from '../support/harness.js';
import { freshUser, usedToday } from '../support/helpers.js';
import { request, type RawResponse } from '../support/http.js';

const ORIGIN = 'https://playground.example';

/** What sluice's own answers to a cross-origin call carry: the relay's CORS fields, and the fields a page may read. */
const OWN_CORS = {
  'access-control-allow-credentials': 'true',
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'Retry-After, RateLimit, RateLimit-Policy, X-Oneapi-Request-Id',
};

/** The CORS fields of an answer. */
function cors(r: RawResponse): Record<string, string> {
  return Object.fromEntries(Object.entries(r.headers).filter(([k]) => k.startsWith('access-control-')) as Array<[string, string]>);
}

/** What the relay answers a call straight to it: status, CORS fields and body. */
async function direct(h: Harness, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; cors: Record<string, string>; body: string }> {
  const r = await request(h.relay.url, method, path, { headers });
  return { status: r.status, cors: cors(r), body: r.text };
}

describe('CORS preflights (issue #17, item 8)', () => {
  const h = useHarness({ store: 'memory', file: { ipLimits: [{ name: 'usage-query', paths: ['/api/log/token'], limit: 2, windowSeconds: 1200 }] } });

  it.each(['/v1/chat/completions', '/v1/messages', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', '/pg/chat/completions', '/api/usage/token/'])(
    'OPTIONS %s from a browser (Origin, Access-Control-Request-Method, no key) gets the relay preflight answer, uncounted',
    async (path) => {
      const preflight = { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-stainless-os' };
      const through = await request(h.url, 'OPTIONS', path, { headers: preflight });
      const relayed = h.relay.requests.at(-1);
      expect({ status: through.status, cors: cors(through), body: through.text }).toEqual(await direct(h, 'OPTIONS', path, preflight));
      expect(through.status).toBe(204);
      expect(cors(through)).toEqual({
        'access-control-allow-credentials': 'true',
        'access-control-allow-headers': '*',
        'access-control-allow-methods': 'GET,POST,PUT,DELETE,OPTIONS',
        'access-control-allow-origin': '*',
        'access-control-max-age': '43200',
      });
      // The relay got it without any key header, and the free tier counted nothing.
      expect(relayed?.method).toBe('OPTIONS');
      expect(relayed?.headers.authorization).toBeUndefined();
      expect(relayed?.model).toBeUndefined();
    },
  );

  it('a preflight carrying a key header gets no key to the relay, and counts against no one', async () => {
    const { user, key } = await freshUser(h, 'pf');
    const r = await request(h.url, 'OPTIONS', '/v1/chat/completions', {
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', authorization: `Bearer ${key}`, 'x-api-key': key },
    });
    expect(r.status).toBe(204);
    const seen = h.relay.requests.at(-1)!;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-api-key']).toBeUndefined();
    expect(seen.key).toBe('');
    expect(await usedToday(h, user)).toBe(0);
  });

  it('preflights still count against the per-IP limit of the path they ask about', async () => {
    const headers = { origin: ORIGIN, 'access-control-request-method': 'GET', 'x-forwarded-for': '198.51.100.40' };
    expect((await request(h.url, 'OPTIONS', '/api/log/token', { headers })).status).toBe(204);
    expect((await request(h.url, 'OPTIONS', '/api/log/token', { headers })).status).toBe(204);
    const limited = await request(h.url, 'OPTIONS', '/api/log/token', { headers });
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBeDefined();
    expect(limited.text).toBe('');
  });

  it('an OPTIONS that is no preflight needs a key: 401 readable by the browser (CORS headers as the relay sends them); with a key it gets the relay answer', async () => {
    const noMethod = await request(h.url, 'OPTIONS', '/v1/chat/completions', { headers: { origin: ORIGIN } });
    expect(noMethod.status).toBe(401);
    expect(cors(noMethod)).toEqual(OWN_CORS);
    expect(JSON.parse(noMethod.text)).toMatchObject({ error: { code: '', type: 'new_api_error' } });
    const { key } = await freshUser(h, 'opt');
    const withKey = await request(h.url, 'OPTIONS', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` } });
    expect(withKey.status).toBe(404); // no OPTIONS route in new-api: its 404 for /v1
    expect(h.relay.requests.at(-1)?.key).toBe(key);
  });

  it("sluice's own refusals of a cross-origin call carry the relay's CORS headers, so a browser client can read them", async () => {
    const { key } = await freshUser(h, 'cors');
    const headers = { origin: ORIGIN, authorization: `Bearer ${key}` };
    for (let i = 0; i < 20; i++) await request(h.url, 'POST', '/v1/chat/completions', { headers, body: '{"model":"vend-flash-free","messages":[]}' });
    const limited = await request(h.url, 'POST', '/v1/chat/completions', { headers, body: '{"model":"vend-flash-free","messages":[]}' });
    expect(limited.status).toBe(429);
    expect(cors(limited)).toEqual(OWN_CORS);
    expect(limited.headers['retry-after']).toBeDefined();
    expect(limited.headers['ratelimit']).toBeDefined();
    expect(limited.headers['ratelimit-policy']).toBeDefined();
    expect(limited.headers['x-oneapi-request-id']).toBeDefined();
    const unauthorized = await request(h.url, 'POST', '/v1/chat/completions', { headers: { origin: ORIGIN }, body: '{}' });
    expect(unauthorized.status).toBe(401);
    expect(cors(unauthorized)['access-control-allow-origin']).toBe('*');
    expect(cors(unauthorized)).toEqual(OWN_CORS);
    // Where the relay sends none (its dashboard /api/* routes), neither does sluice.
    const dashboard = await request(h.url, 'GET', '/api/user/self', { headers: { origin: ORIGIN } });
    expect(dashboard.status).toBe(401);
    expect(cors(dashboard)).toEqual({});
  });

  it("the relay's own answers keep the relay's CORS fields; on a free call sluice exposes only the RateLimit fields it added", async () => {
    const { key } = await freshUser(h, 'cors-relay');
    const headers = { origin: ORIGIN, authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    // A paid call: the relay's answer, its CORS fields as the relay sent them (it exposes nothing).
    const paid = await request(h.url, 'POST', '/v1/chat/completions', { headers, body: '{"model":"vend-flash","messages":[]}' });
    const straight = await request(h.relay.url, 'POST', '/v1/chat/completions', { headers, body: '{"model":"vend-flash","messages":[]}' });
    expect(paid.status).toBe(200);
    expect(cors(paid)).toEqual(cors(straight));
    expect(cors(paid)['access-control-expose-headers']).toBeUndefined();
    // A free call the relay answers: sluice's RateLimit fields are added, and exposed, so a browser
    // client can pace itself before the 429; the relay's own fields stay as they were.
    const free = await request(h.url, 'POST', '/v1/chat/completions', { headers, body: '{"model":"vend-flash-free","messages":[]}' });
    expect(free.status).toBe(200);
    expect(free.headers['ratelimit']).toBeDefined();
    expect(cors(free)).toEqual({ ...cors(straight), 'access-control-expose-headers': 'ratelimit-policy, ratelimit' });
    // Same-origin (no Origin): nothing to expose, nothing added.
    const plain = await request(h.url, 'POST', '/v1/chat/completions', {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"model":"vend-flash-free","messages":[]}',
    });
    expect(plain.status).toBe(200);
    expect(cors(plain)).toEqual({});
  });
});

describe('the key header the client used (issue #17, item 9)', () => {
  const h = useHarness({ store: 'memory' });

  /** The same call through sluice and straight to the relay: same status and body, the same key authenticated. */
  async function sameAsDirect(path: string, headers: (key: string) => Record<string, string>): Promise<string> {
    const { key } = await freshUser(h, 'hdr');
    const through = await request(h.url, 'GET', path, { headers: headers(key) });
    const seen = h.relay.requests.at(-1)!;
    const straight = await request(h.relay.url, 'GET', path, { headers: headers(key) });
    expect(through.status).toBe(straight.status);
    expect(Object.keys(JSON.parse(through.text) as object)).toEqual(Object.keys(JSON.parse(straight.text) as object));
    expect(JSON.parse(through.text)).toEqual(JSON.parse(straight.text));
    expect(seen.key).toBe(key);
    return through.text;
  }

  it("GET /v1/models with x-api-key and anthropic-version lists Anthropic's shape, as the relay answers it; Authorization alone OpenAI's", async () => {
    const text = await sameAsDirect('/v1/models', (key) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }));
    expect(Object.keys(JSON.parse(text) as object)).toEqual(['data', 'first_id', 'has_more', 'last_id']);
    const openai = await sameAsDirect('/v1/models', (key) => ({ authorization: `Bearer ${key}` }));
    expect(JSON.parse(openai)).toMatchObject({ object: 'list', success: true });
  });

  it("GET /v1/models with x-goog-api-key gets the relay's Gemini-format answer", async () => {
    const text = await sameAsDirect('/v1/models', (key) => ({ authorization: `Bearer ${key}`, 'x-goog-api-key': key }));
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'model_not_found' } });
  });

  it('GET /v1/models?key= gets the Gemini-format answer without the key in the URL the relay sees', async () => {
    const { key } = await freshUser(h, 'qk');
    const r = await request(h.url, 'GET', `/v1/models?key=${key}`, { headers: { authorization: `Bearer ${key}` } });
    expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'model_not_found' } });
    const seen = h.relay.requests.at(-1)!;
    expect(seen.url).toBe('/v1/models');
    expect(seen.key).toBe(key);
  });

  it('a second key beside the authenticated one never reaches the relay as the key it reads', async () => {
    const { key } = await freshUser(h, 'two');
    const { key: other } = await freshUser(h, 'victim');
    const calls: Array<[method: string, path: string, headers: Record<string, string>]> = [
      ['POST', '/v1/chat/completions', { authorization: `Bearer ${key}`, 'sec-websocket-protocol': `realtime, openai-insecure-api-key.${other}` }],
      ['POST', '/v1/chat/completions', { authorization: `Bearer ${key}`, 'sec-websocket-protocol': other }],
      ['POST', `/v1/models/vend-flash:generateContent?key=${other}`, { authorization: `Bearer ${key}` }],
      ['POST', '/v1/models/vend-flash:generateContent', { authorization: `Bearer ${key}`, 'x-goog-api-key': other }],
      ['POST', '/v1beta/models/vend-flash/v1/messages:generateContent', { 'x-goog-api-key': key, 'x-api-key': other }],
    ];
    for (const [method, path, headers] of calls) {
      const r = await request(h.url, method, path, { headers, body: '{"model":"vend-flash","messages":[],"contents":[]}' });
      expect(r.status).toBe(200);
      const seen = h.relay.requests.at(-1)!;
      expect({ path, key: seen.key }).toEqual({ path, key });
      expect(JSON.stringify(seen.headers)).not.toContain(other.slice(3));
      expect(seen.url).not.toContain(other.slice(3));
    }
  });
});

describe("sluice's answers for a relay that fails carry the CORS fields too", () => {
  it('502 for a relay that is not listening, 504 for one that never answers: both readable cross-origin', async () => {
    const silent = net.createServer((s) => s.on('error', () => {})); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r())); // nothing listens there now
    const cases: Array<[upstream: string, status: number, code: string]> = [
      [`http://127.0.0.1:${closedPort}`, 502, 'upstream_unreachable'],
      [`http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`, 504, 'upstream_timeout'],
    ];
    try {
      for (const [upstream, status, code] of cases) {
        const h = await startHarness({ store: 'memory', env: { SLUICE_UPSTREAM_URL: upstream }, file: { upstream: { headersTimeoutSeconds: 1 } } });
        try {
          const { key } = await h.createKey(`cors-${status}`);
          const r = await request(h.url, 'POST', '/v1/chat/completions', {
            headers: { origin: ORIGIN, authorization: `Bearer ${key}` },
            body: '{"model":"vend-flash","messages":[]}',
          });
          expect(r.status).toBe(status);
          expect(JSON.parse(r.text)).toMatchObject({ error: { code } });
          expect(cors(r)).toEqual(OWN_CORS);
        } finally {
          await h.close();
        }
      }
    } finally {
      silent.close();
    }
  }, 15_000);
});
