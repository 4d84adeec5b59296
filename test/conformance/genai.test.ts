/**
 * Conformance: the official `@google/genai` SDK (2.x) with `httpOptions.baseUrl` pointed at sluice,
 * the relay stand-in behind it. The SDK sends the key as `x-goog-api-key` to
 * `/v1beta/models/{model}:generateContent` (and `:streamGenerateContent?alt=sse`).
 *
 * What a caller can read from this SDK's `ApiError`: `status` (the HTTP status) and `message`,
 * which is the JSON error body as a string. sluice's bodies are OpenAI-shaped, so the code is
 * `JSON.parse(err.message).error.code`. The SDK keeps no response headers on the error:
 * `Retry-After` is reachable only through a custom `httpOptions.fetch` (shown below).
 */
import { describe, expect, it } from 'vitest';
import { ApiError, GoogleGenAI, type HttpOptions } from '@google/genai';
import { STORE_KINDS, useHarness, type Harness } from '../support/harness.js';
import { bodyJson, lastRequest, rejectionOf } from '../support/helpers.js';
import { STANDIN_MODELS, STANDIN_TEXT } from '../../demo/relay.js';
import { BAD_KEY, FREE, PAID, REQUEST_ID_SUFFIX, countingFetch, expectEachRejected, expectForwardedAuth, freshKey, useKeyedClient } from './support.js';
import { ONE_FREE_CALL_A_SECOND, expectEachRejectedOnce, spendTheDay, useFreeTierHarness } from './free-tier.js';
import { sleep } from '../support/time.js';

function client(h: Harness, key: string, httpOptions: HttpOptions = {}): GoogleGenAI {
  return new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: h.url, ...httpOptions } });
}

/** The error body a caller can recover from `ApiError.message`. */
function bodyOf(err: unknown): { error: { code: string; message: string; type: string } } {
  expect(err).toBeInstanceOf(ApiError);
  return JSON.parse((err as ApiError).message) as { error: { code: string; message: string; type: string } };
}

/** A 402 as this SDK raises it: an ApiError with status 402, `code` in its message. */
function expect402(err: unknown, code: string): void {
  expect((err as ApiError).status).toBe(402);
  expect(bodyOf(err).error.code).toBe(code);
}

async function streamText(genai: GoogleGenAI, model = FREE): Promise<string> {
  let text = '';
  for await (const chunk of await genai.models.generateContentStream({ model, contents: 'hi' })) text += chunk.text ?? '';
  return text;
}

describe('genai SDK through sluice: calls', () => {
  const h = useHarness({ store: 'redis' });
  const caller = useKeyedClient(h, 'gg', (key) => client(h, key));

  it('models.generateContent', async () => {
    const res = await caller.sdk.models.generateContent({ model: FREE, contents: 'hi' });
    expect(res.text).toBe(STANDIN_TEXT);
    expect(res.candidates?.[0]?.finishReason).toBe('STOP');
    expect(res.usageMetadata?.totalTokenCount).toBeGreaterThan(0);
    expect(res.modelVersion).toBe(FREE);

    const r = lastRequest(h.relay);
    expect(r.url).toBe(`/v1beta/models/${FREE}:generateContent`);
    expectForwardedAuth(r, caller.key, 'x-goog-api-key');
    expect(bodyJson(r)['contents']).toEqual([{ role: 'user', parts: [{ text: 'hi' }] }]);
  });

  it('models.generateContentStream yields the complete text, the finish reason and usage', async () => {
    h.relay.behave(() => true, { sseEvents: 12 });
    const stream = await caller.sdk.models.generateContentStream({ model: FREE, contents: 'hi' });
    let text = '';
    let chunks = 0;
    let finish: string | undefined;
    let total: number | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.text ?? '';
      finish = chunk.candidates?.[0]?.finishReason ?? finish;
      total = chunk.usageMetadata?.totalTokenCount ?? total;
    }
    expect(text).toBe(STANDIN_TEXT);
    expect(chunks).toBe(12);
    expect(finish).toBe('STOP');
    expect(total).toBeGreaterThan(0);
    const r = lastRequest(h.relay);
    expect(r.url).toBe(`/v1beta/models/${FREE}:streamGenerateContent?alt=sse`);
    expectForwardedAuth(r, caller.key, 'x-goog-api-key');
    expect(r.closedEarly).toBe(false);
  });

  it("models.list gets the relay's Gemini list, as the SDK gets it from the relay directly, with its key header kept", async () => {
    const names = async (c: GoogleGenAI): Promise<unknown[]> => {
      const out: unknown[] = [];
      for await (const m of await c.models.list()) out.push(m);
      return out;
    };
    const through = await names(caller.sdk);
    const r = lastRequest(h.relay);
    expect(r.url.split('?')[0]).toBe('/v1beta/models');
    expectForwardedAuth(r, caller.key, 'x-goog-api-key');
    expect(r.model).toBeUndefined(); // a list counts against no free tier
    const direct = await names(new GoogleGenAI({ apiKey: caller.key, httpOptions: { baseUrl: h.relay.url } }));
    expect(through).toEqual(direct);
    expect(through.map((m) => (m as { name: string }).name)).toEqual([...STANDIN_MODELS]);
  });

  it('a bad key: ApiError with status 401; the message is the JSON body (code "", type new_api_error)', async () => {
    const bad = client(h, BAD_KEY);
    await expectEachRejected([() => bad.models.generateContent({ model: FREE, contents: 'hi' }), () => streamText(bad)], (err) => {
      expect((err as ApiError).status).toBe(401);
      const body = bodyOf(err);
      expect(body.error.code).toBe('');
      expect(body.error.type).toBe('new_api_error');
      expect(body.error.message).toMatch(REQUEST_ID_SUFFIX);
    });
    expect(h.relay.requests).toHaveLength(0);
  });

  it('apiVersion "v1" sends x-goog-api-key to /v1/models/..., where the contract does not accept it: 401', async () => {
    const v1 = client(h, caller.key, { apiVersion: 'v1' });
    const err = await rejectionOf(v1.models.generateContent({ model: FREE, contents: 'hi' }));
    expect((err as ApiError).status).toBe(401);
    expect(h.relay.requests).toHaveLength(0);
  });

  it('aborting through config.abortSignal mid-stream frees the relay connection', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 50 });
    const ac = new AbortController();
    const stream = await caller.sdk.models.generateContentStream({ model: FREE, contents: 'hi', config: { abortSignal: ac.signal } });
    let chunks = 0;
    const err = await rejectionOf(
      (async () => {
        for await (const _chunk of stream) if (++chunks === 2) ac.abort();
      })(),
    );
    expect((err as Error).name).toBe('AbortError');
    expect(chunks).toBe(2);
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
    expect(h.relay.requests).toHaveLength(1);
  });

  it('(SDK behaviour) leaving the loop WITHOUT aborting does not close the connection: the relay streams on to the end', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 50, sseEvents: 10 });
    const stream = await caller.sdk.models.generateContentStream({ model: FREE, contents: 'hi' });
    for await (const _chunk of stream) break;
    // genai 2.x only releases the body's reader lock; the response keeps flowing until it ends.
    await sleep(200);
    expect(h.relay.requests[0]?.closedEarly).toBe(false);
  });
});

describe.each(STORE_KINDS)('genai SDK through sluice: free-tier errors on the %s store', (kind) => {
  const { h, clock } = useFreeTierHarness(kind);

  it('over the window: ApiError status 429, code free_tier_rate_limited in the message; Retry-After through a custom fetch', async () => {
    const key = await freshKey(h, 'gg-429');
    const genai = client(h, key);
    for (let i = 0; i < 20; i++) {
      const res = await genai.models.generateContent({ model: FREE, contents: 'hi' });
      expect(res.text).toBe(STANDIN_TEXT);
    }
    for (const call of [() => genai.models.generateContent({ model: FREE, contents: 'hi' }), () => streamText(genai)]) {
      const err = await rejectionOf(call());
      expect((err as ApiError).status).toBe(429);
      const body = bodyOf(err);
      expect(body.error.code).toBe('free_tier_rate_limited');
      expect(body.error.type).toBe('new_api_error');
      // The error object carries no headers at all.
      expect(Object.keys(err as object)).not.toContain('headers');
    }

    // The workaround for Retry-After: a fetch that keeps the last response's headers.
    const counter = countingFetch();
    const seeing = client(h, key, { fetch: counter.fetch });
    const err = await rejectionOf(seeing.models.generateContent({ model: FREE, contents: 'hi' }));
    expect((err as ApiError).status).toBe(429);
    expect(counter.lastHeaders?.get('retry-after')).toBe('60');
    expect(h.relay.requests).toHaveLength(20);

    // The paid counterpart is not limited.
    expect((await genai.models.generateContent({ model: PAID, contents: 'hi' })).text).toBe(STANDIN_TEXT);
    clock.advance(60_000);
    expect((await genai.models.generateContent({ model: FREE, contents: 'hi' })).text).toBe(STANDIN_TEXT);
  });

  it('over the day: ApiError status 402, code free_tier_daily_exhausted; not retried even with retryOptions', async () => {
    const key = await freshKey(h, 'gg-day');
    const genai = client(h, key);
    await spendTheDay(
      clock,
      () => genai.models.generateContent({ model: FREE, contents: 'hi' }),
      async () => expect(await streamText(genai)).toBe(STANDIN_TEXT),
    );

    const counter = countingFetch();
    const withRetries = client(h, key, { fetch: counter.fetch, retryOptions: { attempts: 3, initialDelay: 0.05 } });
    const calls = [() => withRetries.models.generateContent({ model: FREE, contents: 'hi' }), () => streamText(withRetries)];
    await expectEachRejectedOnce(counter, 402, calls, (err) => expect402(err, 'free_tier_daily_exhausted'));
    expect(h.relay.requests).toHaveLength(25);
  });

  it('relay busy (its 429 on an admitted free call): ApiError status 402, code free_tier_exhausted; not retried', async () => {
    h.relay.behave(() => true, { status: 429 });
    const counter = countingFetch();
    const genai = client(h, await freshKey(h, 'gg-busy'), { fetch: counter.fetch, retryOptions: { attempts: 3, initialDelay: 0.05 } });
    const calls = [() => genai.models.generateContent({ model: FREE, contents: 'hi' }), () => streamText(genai)];
    await expectEachRejectedOnce(counter, 402, calls, (err) => {
      expect402(err, 'free_tier_exhausted');
      expect(counter.lastHeaders?.get('retry-after')).toBe('30');
    });
    expect(h.relay.requests).toHaveLength(2);
  });
});

describe('genai SDK through sluice: retries on the free-tier 429', () => {
  const h = useHarness(ONE_FREE_CALL_A_SECOND);

  it('by default the SDK does not retry: the 429 reaches the caller after one attempt', async () => {
    const counter = countingFetch();
    const genai = client(h, await freshKey(h, 'gg-default'), { fetch: counter.fetch });
    await genai.models.generateContent({ model: FREE, contents: 'hi' });
    const err = await rejectionOf(genai.models.generateContent({ model: FREE, contents: 'hi' }));
    expect((err as ApiError).status).toBe(429);
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429]);
  });

  it('with retryOptions it retries the 429 on its own schedule, ignoring Retry-After', async () => {
    // Retry-After says 1 s; the SDK waits 0.1 s and then 0.2 s (no jitter) and gives up.
    const counter = countingFetch();
    const key = await freshKey(h, 'gg-retry');
    const hasty = client(h, key, { fetch: counter.fetch, retryOptions: { attempts: 3, initialDelay: 0.1, jitter: 0 } });
    await hasty.models.generateContent({ model: FREE, contents: 'hi' });
    const err = await rejectionOf(hasty.models.generateContent({ model: FREE, contents: 'hi' }));
    expect((err as ApiError).status).toBe(429);
    expect(bodyOf(err).error.code).toBe('free_tier_rate_limited');
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429, 429, 429]);
    expect(counter.lastHeaders?.get('retry-after')).toBe('1');

    // With a first delay at least as long as the window, the retry gets in, streaming too.
    const patient = client(h, await freshKey(h, 'gg-retry2'), {
      fetch: counter.fetch,
      retryOptions: { attempts: 2, initialDelay: 1.1, jitter: 0 },
    });
    counter.attempts.length = 0;
    await patient.models.generateContent({ model: FREE, contents: 'hi' });
    expect(await streamText(patient)).toBe(STANDIN_TEXT);
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429, 200]);
  });
});
