import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, startHarness, STORE_KINDS, type Harness } from '../support/harness.js';
import { metricReader } from '../support/helpers.js';
import { request } from '../support/http.js';

describe("the relay's 429 under operator rules", () => {
  let h: Harness;
  let key: string;
  beforeAll(async () => {
    h = await startHarness({
      store: 'memory',
      file: {
        ipLimits: [
          { name: 'chat', paths: ['/v1/chat/*'], limit: 1000, windowSeconds: 60 },
          { name: 'watch', paths: ['/api/*'], limit: 1000, windowSeconds: 180, shadow: true },
        ],
      },
    });
    key = (await h.createKey('rules')).key;
  });
  afterAll(() => h.close());

  it('passes unchanged on a model path a rule covers, and under a shadow rule', async () => {
    h.relay.behave(() => true, { status: 429 });
    try {
      const chat = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash"}' });
      const usage = await request(h.url, 'GET', '/api/usage/token/', { headers: { authorization: `Bearer ${key}` } });
      expect([chat.status, chat.headers['retry-after']]).toEqual([429, undefined]);
      expect([usage.status, usage.headers['retry-after']]).toEqual([429, undefined]);
    } finally {
      h.relay.reset();
    }
  });
});

describe.each(STORE_KINDS)('per-IP limits on the %s store', (kind) => {
  let h: Harness;
  let clock: ManualClock;
  let key: string;

  beforeAll(async () => {
    clock = new ManualClock(Date.UTC(2026, 5, 1, 0, 0, 0));
    // Loopback is a trusted proxy here so each test can act as its own client address.
    h = await startHarness({ store: kind, clock, file: { trustedProxies: ['127.0.0.0/8', '::1/128'] } });
    key = (await h.createKey('ip-user')).key;
  });
  afterAll(() => h.close());

  const get = (path: string, ip: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
    request(h.url, 'GET', path, { headers: { ...headers, 'x-forwarded-for': ip } });

  it('shares one budget of 20 per 1200 s between the two usage query endpoints, then 429 with Retry-After and an empty body', async () => {
    const ip = '203.0.113.1';
    for (let i = 0; i < 20; i++) {
      const r = await get(i % 2 ? '/api/log/token' : '/api/usage/token/', ip);
      expect(r.status).toBe(200);
    }
    for (const p of ['/api/log/token', '/api/usage/token/']) {
      const r = await get(p, ip);
      expect(r.status).toBe(429);
      expect(r.body.length).toBe(0);
      expect(r.headers['content-type']).toBeUndefined();
      expect(r.headers['retry-after']).toBe('1200');
    }
    // Another address has its own budget.
    expect((await get('/api/log/token', '203.0.113.2')).status).toBe(200);
    clock.advance(1200_000);
    expect((await get('/api/log/token', ip)).status).toBe(200);
  });

  it("gives the relay's own per-address 429 (no Retry-After, new-api's critical limit) the matched rule's Retry-After", async () => {
    const outcome = metricReader(h, 'sluice_requests_total', { family: 'usage_query', outcome: 'relay_ip_limited' });
    const before = await outcome();
    h.relay.behave((r) => r.url.startsWith('/api/'), { status: 429 });
    try {
      const usage = await get('/api/usage/token/', '203.0.113.60');
      expect(usage.status).toBe(429);
      expect(usage.headers['retry-after']).toBe('1200');
      expect(usage.body.length).toBe(0);
      const login = await request(h.url, 'POST', '/api/user/login', { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': '203.0.113.60' }, body: '{}' });
      expect(login.status).toBe(429);
      expect(login.headers['retry-after']).toBe('180'); // the /api/* rule's window
      // A relay 429 that says when to retry passes as it is; so does one with a body.
      h.relay.behave((r) => r.url.startsWith('/api/'), { status: 429, headers: { 'retry-after': '7' } });
      expect((await get('/api/log/token', '203.0.113.61')).headers['retry-after']).toBe('7');
      const said = '{"success":false,"message":"wait 30 seconds"}';
      h.relay.behave((r) => r.url.startsWith('/api/'), { status: 429, body: said });
      const verification = await get('/api/verification', '203.0.113.61');
      expect([verification.status, verification.text, verification.headers['retry-after']]).toEqual([429, said, undefined]);
    } finally {
      h.relay.reset();
    }
    expect((await outcome()) - before).toBe(1);
  });

  it("answers a refused address's retries without a store decision, Retry-After counting down", async () => {
    const ip = '203.0.113.30';
    for (let i = 0; i < 20; i++) expect((await get('/api/log/token', ip)).status).toBe(200);
    const decisions = metricReader(h, 'sluice_store_seconds_count', { op: 'consume' });
    const before = await decisions();
    const remembered = metricReader(h, 'sluice_remembered_refusals_total', { limit: 'ip:usage-query' });
    const rememberedBefore = await remembered();
    const waits: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await get(i % 2 ? '/api/log/token' : '/api/usage/token/', ip);
      expect(r.status).toBe(429);
      waits.push(String(r.headers['retry-after']));
      clock.advance(2_000); // within limits.rememberRefusalsSeconds (10 s)
    }
    expect(waits).toEqual(['1200', '1198', '1196', '1194']);
    clock.advance(1_192_000);
    expect((await get('/api/log/token', ip)).status).toBe(200); // t = 1200 s
    if (kind === 'redis') expect((await decisions()) - before).toBe(2); // the first refusal and the last call
    expect((await remembered()) - rememberedBefore).toBe(3); // the retries after the first refusal
  });

  it('counts requests before authentication', async () => {
    const ip = '203.0.113.10';
    for (let i = 0; i < 20; i++) expect((await get('/api/usage/token/', ip, {})).status).toBe(401);
    expect((await get('/api/usage/token/', ip)).status).toBe(429);
  });

  it('limits other /api/*, /v1/dashboard/* and its alias /dashboard/billing/* to 360 per 180 s, a budget separate from the usage queries', async () => {
    const ip = '203.0.113.20';
    // The relay serves the billing endpoints at /dashboard/billing/* too: the same budget.
    const paths = ['/api/status', '/v1/dashboard/billing/usage', '/dashboard/billing/usage'];
    for (let i = 0; i < 360; i++) {
      const r = await get(paths[i % 3]!, ip);
      if (r.status !== 200) throw new Error(`call ${i} got ${r.status}`);
    }
    const r = await get('/api/user/self', ip);
    expect(r.status).toBe(429);
    expect((await get('/dashboard/billing/subscription', ip)).status).toBe(429);
    expect(r.body.length).toBe(0);
    expect(r.headers['retry-after']).toBe('180');
    expect((await get('/api/log/token', ip)).status).toBe(200);
    clock.advance(90_000);
    expect((await get('/api/status', ip)).status).toBe(429);
    clock.advance(90_000);
    expect((await get('/api/status', ip)).status).toBe(200);
  });

  it('does not limit model endpoints by IP', async () => {
    const ip = '203.0.113.30';
    for (let i = 0; i < 30; i++) expect((await get('/v1/models', ip)).status).toBe(200);
  });

  it('takes the right-most untrusted X-Forwarded-For entry, so a client cannot pick its address', async () => {
    const ip = '203.0.113.40';
    for (let i = 0; i < 20; i++) {
      // Each request claims a different origin on the left; the proxy-appended entry is what counts.
      expect((await get('/api/log/token', `10.0.0.${i}, ${ip}`)).status).toBe(200);
    }
    expect((await get('/api/log/token', `10.9.9.9, ${ip}`)).status).toBe(429);
    h.relay.reset();
    await get('/v1/models', `198.51.100.7, ${ip}, 127.0.0.1`);
    expect(h.relay.requests[0]!.headers['x-forwarded-for']).toBe(ip);
  });
});

describe.each(STORE_KINDS)('per-IP limits from an untrusted peer on the %s store', (kind) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      store: kind,
      file: {
        ipLimits: [
          { name: 'q', paths: ['/api/log/token', '/api/custom*'], limit: 3, windowSeconds: 60 },
          // A prefix rule listed before an exact rule for one of its paths: the prefix rule takes it.
          { name: 'ordered-prefix', paths: ['/api/ordered/*'], limit: 2, windowSeconds: 60 },
          { name: 'ordered-exact', paths: ['/api/ordered/x', '/api/ordered-other'], limit: 5, windowSeconds: 600 },
        ],
      },
    });
  });
  afterAll(() => h.close());

  it('ignores a spoofed X-Forwarded-For and limits the socket address', async () => {
    for (let i = 0; i < 3; i++) {
      expect((await request(h.url, 'GET', '/api/log/token', { headers: { 'x-forwarded-for': `198.51.100.${i}` } })).status).toBe(401);
    }
    const r = await request(h.url, 'GET', '/api/customize', { headers: { 'x-forwarded-for': '198.51.100.99' } });
    expect(r.status).toBe(429);
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(59);
  });

  it('tells the relay the socket address, not the spoofed one', async () => {
    const k = (await h.createKey('spoof')).key;
    h.relay.reset();
    await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${k}`, 'x-forwarded-for': '1.2.3.4', 'x-real-ip': '1.2.3.4' } });
    const got = h.relay.requests[0]!.headers;
    expect(got['x-forwarded-for']).toBe('127.0.0.1');
    expect(got['x-real-ip']).toBeUndefined();
  });

  it('uses configured rules in place of the defaults', async () => {
    // /api/usage/token/ matches no configured rule now: unlimited by IP.
    for (let i = 0; i < 25; i++) expect((await request(h.url, 'GET', '/api/usage/token/')).status).toBe(401);
  });

  it('takes the first matching rule: a path two rules cover draws only from the earlier rule budget', async () => {
    // /api/ordered/x matches the prefix rule (2 per 60 s) first, and the exact rule (5 per 600 s) after it.
    for (let i = 0; i < 2; i++) expect((await request(h.url, 'GET', '/api/ordered/x')).status).toBe(401);
    const r = await request(h.url, 'GET', '/api/ordered/x');
    expect(r.status).toBe(429);
    const retryAfter = Number(r.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // The exact rule's budget is whole: none of those calls was counted against it.
    for (let i = 0; i < 5; i++) expect((await request(h.url, 'GET', '/api/ordered-other')).status).toBe(401);
    expect((await request(h.url, 'GET', '/api/ordered-other')).status).toBe(429);
  });
});
