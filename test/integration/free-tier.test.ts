import { zstdCompressSync } from '../support/zstd.js';
import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { MAX_MODEL_BYTES, MAX_TOP_LEVEL_MEMBERS } from '../../src/model/scan.js';
import type { RedisStore } from '../../src/store/redis/index.js';
import { ManualClock, startHarness, STORE_KINDS, useHarness, type Harness } from '../support/harness.js';
import { metricReader, metricsText, metricValue } from '../support/helpers.js';
import { capturedLog } from '../support/log.js';
import { request, type RawResponse } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';
import { eventually } from '../support/time.js';

const FREE = 'vend-flash-free';
const FREE2 = 'vend-v4-flash-free';
const FREE3 = 'vendd-5.3-flash-free';
const PAID = 'vend-flash';
const LIMIT_BODY = /^\{"error":\{"code":"(free_tier_[a-z_]+)","message":"[^"]+ \(request id: ([A-Za-z0-9]+)\)","type":"new_api_error"\}\}$/;

describe.each(STORE_KINDS)('free tier on the %s store', (kind) => {
  let h: Harness;
  let clock: ManualClock;
  let n = 0;

  beforeAll(async () => {
    clock = new ManualClock(Date.UTC(2026, 2, 10, 4, 0, 0)); // 12:00 Beijing
    h = await startHarness({ store: kind, clock });
  });
  afterAll(() => h.close());
  afterEach(() => h.relay.reset());

  /** A fresh user (and key) per test, so tests do not share budgets. */
  async function user(): Promise<string> {
    return (await h.createKey(`u${++n}-${kind}`)).key;
  }

  const chat = (key: string, model: string, extra: Record<string, string> = {}): Promise<RawResponse> =>
    request(h.url, 'POST', '/v1/chat/completions', {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });

  async function burst(key: string, count: number, model = FREE): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push((await chat(key, model)).status);
    return out;
  }

  it('admits 20 calls in the window, then answers 429 free_tier_rate_limited with Retry-After', async () => {
    const k = await user();
    expect(await burst(k, 20)).toEqual(Array(20).fill(200));
    const r = await chat(k, FREE);
    expect(r.status).toBe(429);
    const m = LIMIT_BODY.exec(r.text);
    expect(m, r.text).not.toBeNull();
    expect(m![1]).toBe('free_tier_rate_limited');
    expect(r.headers['x-oneapi-request-id']).toBe(m![2]);
    expect(r.headers['retry-after']).toBe('60');
    expect(h.relay.requests).toHaveLength(20);
  });

  it('gives an honest Retry-After: waiting exactly that long gets the client in, a second less does not', async () => {
    const k = await user();
    for (let i = 0; i < 20; i++) {
      expect((await chat(k, FREE)).status).toBe(200);
      clock.advance(1000); // calls at t = 0..19 s
    }
    clock.advance(10_000); // t = 30 s
    const r = await chat(k, FREE);
    expect(r.status).toBe(429);
    const wait = Number(r.headers['retry-after']);
    expect(wait).toBe(30); // the call at t=0 leaves the window at t=60
    clock.advance((wait - 1) * 1000);
    expect((await chat(k, FREE)).status).toBe(429);
    clock.advance(1000);
    expect((await chat(k, FREE)).status).toBe(200);
    // The next one frees at t=61: exactly one second later.
    const again = await chat(k, FREE);
    expect(again.status).toBe(429);
    expect(again.headers['retry-after']).toBe('1');
  });

  it("answers a refused user's retries without a store decision for a while, Retry-After counting down", async () => {
    const k = await user();
    expect(await burst(k, 20)).toEqual(Array(20).fill(200)); // all at one instant
    const decisions = metricReader(h, 'sluice_store_seconds_count', { op: 'consume' });
    const before = await decisions();
    const remembered = metricReader(h, 'sluice_remembered_refusals_total', { limit: 'free_tier' });
    const rememberedBefore = await remembered();
    const answers: RawResponse[] = [];
    for (let i = 0; i < 5; i++) {
      answers.push(await chat(k, FREE));
      clock.advance(2_000); // within limits.rememberRefusalsSeconds (10 s)
    }
    expect(answers.map((r) => r.status)).toEqual(Array(5).fill(429));
    expect(answers.map((r) => r.headers['retry-after'])).toEqual(['60', '58', '56', '54', '52']);
    const dayReset = Number(/"free-day";r=80;t=(\d+)$/.exec(String(answers[0]!.headers['ratelimit']))?.[1]);
    expect(answers.map((r) => r.headers['ratelimit'])).toEqual([60, 58, 56, 54, 52].map((t) => `"free-window";r=0;t=${t}, "free-day";r=80;t=${dayReset - (60 - t)}`));
    for (const r of answers) expect(LIMIT_BODY.exec(r.text)?.[1]).toBe('free_tier_rate_limited');
    clock.advance(50_000); // t = 60 s: the 20 calls leave the window together
    expect((await chat(k, FREE)).status).toBe(200);
    expect(h.relay.requests).toHaveLength(21);
    if (kind === 'redis') {
      // One decision for the first refusal, one for the admitted call: the retries cost none.
      expect((await decisions()) - before).toBe(2);
    }
    expect((await remembered()) - rememberedBefore).toBe(4); // the retries after the first refusal
  });

  it('uses a sliding window: a burst at the end of one minute still binds at the start of the next', async () => {
    const k = await user();
    clock.advance(59_000);
    expect(await burst(k, 20)).toEqual(Array(20).fill(200));
    clock.advance(2_000); // a fixed-window limiter would have reset here
    expect((await chat(k, FREE)).status).toBe(429);
    clock.advance(58_000);
    expect((await chat(k, FREE)).status).toBe(200);
  });

  it('does not count calls it rejects, so a polling client does not burn its day', async () => {
    const k = await user();
    await burst(k, 20);
    for (let i = 0; i < 30; i++) expect((await chat(k, FREE)).status).toBe(429);
    const state = await fetch(`${h.adminUrl}/admin/users/u${n}-${kind}/limits`, { headers: { authorization: 'Bearer test-admin-token-0123456789' } });
    const body = (await state.json()) as { freeTier: { day: { used: number }; window: { used: number; remaining: number } } };
    expect(body.freeTier.day.used).toBe(20);
    expect(body.freeTier.window).toMatchObject({ used: 20, remaining: 0 });
    clock.advance(60_000);
    expect((await chat(k, FREE)).status).toBe(200);
  });

  it('counts failed calls the relay answered with an error', async () => {
    const k = await user();
    h.relay.behave(() => true, { status: 500 });
    expect(await burst(k, 20)).toEqual(Array(20).fill(500));
    expect((await chat(k, FREE)).status).toBe(429);
  });

  it('sums every free model and every protocol family into one budget per user, across keys', async () => {
    const k = await user();
    const k2 = (await h.createKey(`u${n}-${kind}`)).key; // second key of the same user
    const calls: Array<() => Promise<RawResponse>> = [
      () => chat(k, FREE),
      () => chat(k2, FREE2),
      () => request(h.url, 'POST', '/v1/responses', { headers: { authorization: `Bearer ${k}` }, body: JSON.stringify({ model: FREE3, input: 'hi' }) }),
      () =>
        request(h.url, 'POST', '/v1/messages', {
          headers: { 'x-api-key': k2, 'anthropic-version': '2023-06-01' },
          body: JSON.stringify({ model: FREE, max_tokens: 5, messages: [] }),
        }),
      () => request(h.url, 'POST', `/v1beta/models/${FREE2}:generateContent`, { headers: { 'x-goog-api-key': k }, body: '{"contents":[]}' }),
    ];
    for (let i = 0; i < 20; i++) expect((await calls[i % calls.length]!()).status).toBe(200);
    for (const c of calls) expect((await c()).status).toBe(429);
  });

  it('does not limit paid models, and asks the store nothing for them', async () => {
    const k = await user();
    const consume = h.store.consume.bind(h.store);
    let storeCalls = 0;
    h.store.consume = (...args) => {
      storeCalls++;
      return consume(...args);
    };
    try {
      expect(await burst(k, 30, PAID)).toEqual(Array(30).fill(200));
      expect(storeCalls).toBe(0);
    } finally {
      h.store.consume = consume;
    }
  });

  it('answers 402 free_tier_daily_exhausted after 100 calls in a Beijing day, and the daily answer wins when both bind', async () => {
    const k = await user();
    for (let round = 0; round < 5; round++) {
      expect(await burst(k, 20)).toEqual(Array(20).fill(200));
      if (round < 4) clock.advance(60_000);
    }
    // Both the window (20 just now) and the day (100) are exhausted.
    const r = await chat(k, FREE);
    expect(r.status).toBe(402);
    expect(LIMIT_BODY.exec(r.text)?.[1]).toBe('free_tier_daily_exhausted');
    clock.advance(120_000);
    expect((await chat(k, FREE)).status).toBe(402);
    expect((await chat(k, PAID)).status).toBe(200);
  });

  it('resets the day at 00:00 Beijing time, not at UTC midnight', async () => {
    const small = await startHarness({ store: kind, clock, file: { freeTier: { perDay: 3 } }, relay: h.relay });
    try {
      const k = (await small.createKey(`day-${kind}`)).key;
      const call = () => request(small.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${k}` }, body: JSON.stringify({ model: FREE }) });
      // 23:59:00 UTC = 07:59 Beijing: UTC midnight in one minute must not reset anything.
      clock.set(Date.UTC(2026, 2, 10, 23, 59, 0));
      for (let i = 0; i < 3; i++) expect((await call()).status).toBe(200);
      const r = await call();
      expect(r.status).toBe(402);
      // Retry-After runs to 16:00 UTC the next day (00:00 Beijing).
      expect(Number(r.headers['retry-after'])).toBe(16 * 3600 + 60);
      clock.set(Date.UTC(2026, 2, 11, 0, 0, 30));
      expect((await call()).status).toBe(402);
      // 15:59:59 UTC = 23:59:59 Beijing: still the same day.
      clock.set(Date.UTC(2026, 2, 11, 15, 59, 59));
      expect((await call()).status).toBe(402);
      clock.set(Date.UTC(2026, 2, 11, 16, 0, 0));
      expect((await call()).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('turns the relay 429 on an admitted free call into 402 free_tier_exhausted with Retry-After: 30, and counts it', async () => {
    const k = await user();
    h.relay.behave(() => true, { status: 429 });
    const r = await chat(k, FREE);
    expect(r.status).toBe(402);
    expect(LIMIT_BODY.exec(r.text)?.[1]).toBe('free_tier_exhausted');
    expect(r.text).toMatch(/30.+60 seconds/);
    expect(r.headers['retry-after']).toBe('30');
    expect(h.relay.requests).toHaveLength(1); // no re-routing, no retry
    // A paid call's 429 passes through untouched.
    const p = await chat(k, PAID);
    expect(p.status).toBe(429);
    expect(await burst(k, 19)).toEqual(Array(19).fill(402));
    expect((await chat(k, FREE)).status).toBe(429); // the 20 relay-429s counted
  });

  describe('reads the model the way the relay will', () => {
    const raw = (key: string, body: string | Buffer, headers: Record<string, string> = {}, path = '/v1/chat/completions') =>
      request(h.url, 'POST', path, { headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body });

    async function exhausted(): Promise<string> {
      const k = await user();
      await burst(k, 20);
      return k;
    }

    it('counts nothing on a POST the relay has no route for (count_tokens, a trailing slash): its 404 costs no free call, as on the relay', async () => {
      const k = await user();
      for (const path of ['/v1/messages/count_tokens', '/v1/responses/input_tokens', '/v1/chat/completions/', '/v1/realtime/sessions', '/v1/realtime']) {
        for (let i = 0; i < 11; i++) {
          const r = await raw(k, JSON.stringify({ model: FREE }), {}, path);
          expect(r.status, path).toBe(404);
          expect(r.headers.ratelimit, path).toBeUndefined();
        }
      }
      // 55 such calls, and the user's free calls are all still there.
      expect(await burst(k, 20)).toEqual(Array(20).fill(200));
      expect((await chat(k, FREE)).status).toBe(429);
    });

    it('counts a free call on a POST the relay does route that reads the model without serving it (fine-tunes/{id}/cancel)', async () => {
      const k = await exhausted();
      expect((await raw(k, JSON.stringify({ model: FREE }), {}, '/v1/fine-tunes/ft-1/cancel')).status).toBe(429);
    });

    it('decodes escapes in the key and the value', async () => {
      const k = await exhausted();
      expect((await raw(k, '{"mod\\u0065l":"vend-flash-fre\\u0065"}')).status).toBe(429);
      expect((await raw(k, '{"model":"vend-flash\\u002dfree"}')).status).toBe(429);
    });

    it('refuses duplicate model keys that disagree (Go takes the last, gjson the first), and reads agreeing ones', async () => {
      const k = await exhausted();
      for (const body of [`{"model":"${PAID}","model":"${FREE}"}`, `{"model":"${FREE}","model":"${PAID}"}`, `{"model":"${FREE}","Model":"${PAID}"}`]) {
        const r = await raw(k, body);
        expect(r.status, body).toBe(400);
        expect(JSON.parse(r.text).error.message).toMatch(/conflicting/);
      }
      expect((await raw(k, `{"model":"${FREE}","model":"vend-flash-fre\\u0065"}`)).status).toBe(429);
      expect((await raw(k, `{"Model":"${FREE}"}`)).status).toBe(429);
      expect(h.relay.requests.filter((q) => q.body.toString().includes('"Model"'))).toHaveLength(0);
    });

    it('ignores model fields nested below the top level', async () => {
      const k = await exhausted();
      expect((await raw(k, `{"messages":[{"model":"${FREE}"}],"meta":{"model":"${FREE}"},"model":"${PAID}"}`)).status).toBe(200);
      expect((await raw(k, `{"messages":[{"model":"${PAID}"}],"model":"${FREE}"}`)).status).toBe(429);
    });

    it('inspects compressed bodies, and reads a coding the relay leaves alone as sent', async () => {
      const k = await exhausted();
      const free = Buffer.from(JSON.stringify({ model: FREE }));
      expect((await raw(k, gzipSync(free), { 'content-encoding': 'gzip' })).status).toBe(429);
      expect((await raw(k, free, { 'content-encoding': 'x-unknown' })).status).toBe(429);
      if (zstdCompressSync) {
        expect((await raw(k, zstdCompressSync(free), { 'content-encoding': 'zstd' })).status).toBe(429);
        // Not zstd data: 400, as the relay answers.
        expect((await raw(k, Buffer.from('xx'), { 'content-encoding': 'zstd' })).status).toBe(400);
      } else {
        const r = await raw(k, Buffer.from('xx'), { 'content-encoding': 'zstd' });
        expect(r.status).toBe(415);
        expect(JSON.parse(r.text).error.message).toMatch(/zstd/);
      }
    });

    it('reads form bodies too', async () => {
      const k = await exhausted();
      expect((await raw(k, `model=${FREE}&x=1`, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(429);
    });

    it('reads the model from the Gemini path, percent-encoded or not, and from an encoded /v1 path', async () => {
      const k = await exhausted();
      expect((await raw(k, '{}', {}, `/v1beta/models/${FREE}:streamGenerateContent?alt=sse`)).status).toBe(429);
      expect((await raw(k, '{}', {}, '/v1beta/models/vend-flash-fre%65:generateContent')).status).toBe(429);
      expect((await raw(k, JSON.stringify({ model: FREE }), {}, '/%761/chat/completions')).status).toBe(429);
    });

    it('answers 400 in the OpenAI shape for truncated JSON, and forwards nothing', async () => {
      const k = await user();
      const r = await raw(k, '{"model":"vend-flash-free","messages":[');
      expect(r.status).toBe(400);
      expect(JSON.parse(r.text).error.code).toBe('invalid_request');
      expect(h.relay.started).toBe(0);
    });

    it('answers 400 for a body past the model scan bounds, a small gzip of many fields too, and forwards nothing', async () => {
      const k = await user();
      // 1,001 top-level `model` fields, their name escaped: each would be decoded and compared.
      const members = gzipSync(Buffer.from(`{${'"\\u006dodel":"vend-flash",'.repeat(MAX_TOP_LEVEL_MEMBERS)}"x":1}`));
      const many = await raw(k, members, { 'content-encoding': 'gzip' });
      expect(many.status).toBe(400);
      expect(JSON.parse(many.text).error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining(`more than ${MAX_TOP_LEVEL_MEMBERS} top-level fields`) });
      // A model spelt in `\uXXXX` escapes, past the bound.
      const long = await raw(k, `{"model":"${'\\u00e9'.repeat(Math.ceil(MAX_MODEL_BYTES / 6))}-free"}`);
      expect(long.status).toBe(400);
      expect(JSON.parse(long.text).error.message).toContain(`longer than ${MAX_MODEL_BYTES} bytes`);
      expect(h.relay.started).toBe(0);
      // Within the bounds, as before.
      expect((await raw(k, `{${'"f":1,'.repeat(MAX_TOP_LEVEL_MEMBERS - 1)}"model":"vend-flash"}`)).status).toBe(200);
    });
  });
});

describe('a relay that serves a POST route sluice does not know', () => {
  const logs = capturedLog();
  const h = useHarness({ store: 'memory', log: logs.log });

  it('is counted in sluice_unrouted_answers_total and said once per path: calls there are not counted against the free tier', async () => {
    const { key } = await h.createKey('unrouted');
    h.relay.behave((r) => r.url === '/v1/messages/count_tokens', { body: '{"input_tokens":3}' });
    const call = (path: string) =>
      request(h.url, 'POST', path, { headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: FREE }) });
    for (let i = 0; i < 3; i++) {
      const r = await call('/v1/messages/count_tokens');
      expect(r.status).toBe(200);
      expect(r.headers.ratelimit).toBeUndefined();
    }
    // Its 404 is what the relay answers where it has no route: nothing to say. Nor is its console
    // page, its answer to a target not sent as `/v1…` (`/%761/…` is `/v1/…` decoded).
    expect((await call('/v1/messages/other')).status).toBe(404);
    expect((await call('/%761/messages/other')).status).toBe(200);
    expect(metricValue(await metricsText(h), 'sluice_unrouted_answers_total')).toBe(3);
    const said = logs.lines.filter((l) => l.msg === 'the relay serves a POST route sluice does not know: calls there are not counted against the free tier');
    expect(said).toMatchObject([{ level: 40, path: '/v1/messages/count_tokens', status: 200 }]);
  });
});

describe('remembered free-tier refusals and a Redis that comes back', () => {
  let h: Harness;
  const prefix = uniquePrefix('rc');
  beforeAll(async () => {
    h = await startHarness({ store: 'redis', prefix, file: { freeTier: { perMinute: 1 } } });
  });
  afterAll(() => h.close());

  it('are forgotten when the decision connection reconnects, so counts Redis lost are not refused from memory', async () => {
    const { key } = await h.createKey('comeback');
    const call = () => request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free"}' });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429); // now remembered for up to 10 s
    const store = h.store as RedisStore;
    // Redis loses the minute's count (a restart without persistence), and the connection breaks.
    await store.client.del(`${prefix}{u:comeback}:ft:w`);
    let back = false;
    store.onReconnect(() => (back = true));
    const admin = new Redis(inject('redisUrl'));
    try {
      await admin.client('KILL', 'ID', String(await store.client.client('ID')));
    } finally {
      admin.disconnect();
    }
    await eventually(() => back, { timeoutMs: 5000, intervalMs: 20, what: 'the reconnect' });
    expect((await call()).status).toBe(200);
  });
});
