/**
 * Conformance: the official `openai` SDK (v6) with its base URL pointed at sluice, the relay
 * stand-in behind it. What a caller of the SDK sees is what is asserted: typed results, the
 * error class, `err.code`, and `Retry-After` through `err.headers`.
 */
import { describe, expect, it } from 'vitest';
import OpenAI, { APIError, APIUserAbortError, AuthenticationError, RateLimitError } from 'openai';
import { STORE_KINDS, useHarness, type Harness } from '../support/harness.js';
import { bodyJson, lastRequest, rejectionOf } from '../support/helpers.js';
import { expectStandinModelList } from '../support/sdk.js';
import { STANDIN_TEXT, standinDeltas } from '../../demo/relay.js';
import { BAD_KEY, BEIJING_NOON, FREE, PAID, REQUEST_ID_SUFFIX, countingFetch, expectEachRejected, expectForwardedAuth, freshKey, hi, useKeyedClient } from './support.js';
import { ONE_FREE_CALL_A_SECOND, expectEachRejectedOnce, expectRetriedAfterRetryAfter, spendTheDay, useFreeTierHarness } from './free-tier.js';

function client(h: Harness, key: string, opts: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0, ...opts });
}

/** A 402 as this SDK raises it: an APIError of no subclass (it has none for 402), with `code`. */
function expect402(err: unknown, code: string): APIError {
  expect(err).toBeInstanceOf(APIError);
  expect(err).not.toBeInstanceOf(RateLimitError);
  const e = err as APIError;
  expect(e.status).toBe(402);
  expect(e.code).toBe(code);
  return e;
}

describe("openai SDK through sluice: the relay's headers not in time", () => {
  const h = useHarness({ store: 'memory', file: { upstream: { headersTimeoutSeconds: 1 } } });
  const caller = useKeyedClient(h, 'oa-slow', (key) => client(h, key, { maxRetries: 2 }));

  it('raises the 504 upstream_timeout without retrying it: the relay ran the call once, not three times', async () => {
    h.relay.behave(() => true, { delayMs: 4_000 });
    const err = await rejectionOf(caller.sdk.chat.completions.create({ model: PAID, messages: hi }));
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(504);
    expect((err as APIError).code).toBe('upstream_timeout');
    expect(h.relay.started).toBe(1);
  });
});

describe('openai SDK through sluice: calls', () => {
  const h = useHarness({ store: 'redis' });
  const caller = useKeyedClient(h, 'oa', (key) => client(h, key));

  it('chat.completions.create', async () => {
    const { data, response } = await caller.sdk.chat.completions.create({ model: FREE, messages: hi }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.model).toBe(FREE);
    expect(data.choices[0]?.message.content).toBe(STANDIN_TEXT);
    expect(data.choices[0]?.finish_reason).toBe('stop');
    expect(data.usage?.total_tokens).toBe((data.usage?.prompt_tokens ?? 0) + (data.usage?.completion_tokens ?? 0));
    expect(response.headers.get('x-oneapi-request-id')).toBeTruthy();

    const r = lastRequest(h.relay);
    expect(r.method).toBe('POST');
    expect(r.url).toBe('/v1/chat/completions');
    expectForwardedAuth(r, caller.key);
    expect(bodyJson(r)).toMatchObject({ model: FREE, messages: hi });
  });

  it('chat.completions.create with stream: true yields the complete text, finish reason and usage', async () => {
    h.relay.behave(() => true, { sseEvents: 12 });
    const stream = await caller.sdk.chat.completions.create({
      model: FREE,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      const c = chunk.choices[0];
      if (c?.delta.content) deltas.push(c.delta.content);
      finish = c?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(deltas.join('')).toBe(STANDIN_TEXT);
    expect(deltas).toEqual(standinDeltas(12).filter((d) => d !== ''));
    expect(finish).toBe('stop');
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    const r = lastRequest(h.relay);
    expect(bodyJson(r)['stream']).toBe(true);
    expect(r.closedEarly).toBe(false);
  });

  it('the stream reaches the SDK as the relay wrote it: text/event-stream, chunks, then data: [DONE]', async () => {
    const res = await caller.sdk.chat.completions.create({ model: FREE, messages: hi, stream: true, stream_options: { include_usage: true } }).asResponse();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const frames = (await res.text()).split('\n\n').filter((f) => f !== '');
    expect(frames.at(-1)).toBe('data: [DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.replace(/^data: /, '')) as OpenAI.ChatCompletionChunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(STANDIN_TEXT);
    expect(chunks.at(-1)?.usage?.total_tokens).toBeGreaterThan(0);
  });

  it('the chat.completions.stream helper accumulates the final completion', async () => {
    const stream = caller.sdk.chat.completions.stream({ model: FREE, messages: hi });
    let deltas = '';
    stream.on('content', (d) => {
      deltas += d;
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe(STANDIN_TEXT);
    expect(deltas).toBe(STANDIN_TEXT);
  });

  it('responses.create', async () => {
    const resp = await caller.sdk.responses.create({ model: FREE, input: 'hi' });
    expect(resp.object).toBe('response');
    expect(resp.status).toBe('completed');
    expect(resp.output_text).toBe(STANDIN_TEXT);
    expect(resp.usage?.total_tokens).toBeGreaterThan(0);
    const r = lastRequest(h.relay);
    expect(r.url).toBe('/v1/responses');
    expectForwardedAuth(r, caller.key);
  });

  it('responses.create with stream: true yields the complete text and response.completed', async () => {
    const stream = await caller.sdk.responses.create({ model: FREE, input: 'hi', stream: true });
    const types: string[] = [];
    let text = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(text).toBe(STANDIN_TEXT);
    expect(completed?.output_text ?? completed?.output.length).toBeTruthy();
    expect(completed?.usage?.output_tokens).toBeGreaterThan(0);
  });

  it('models.list', async () => {
    await expectStandinModelList(caller.sdk);
    const r = lastRequest(h.relay);
    expect(r.method).toBe('GET');
    expect(r.url).toBe('/v1/models');
    expectForwardedAuth(r, caller.key);
  });

  it('a key without its sk- prefix works the same', async () => {
    const bare = client(h, caller.key.replace(/^sk-/, ''));
    const res = await bare.chat.completions.create({ model: PAID, messages: hi });
    expect(res.choices[0]?.message.content).toBe(STANDIN_TEXT);
    expectForwardedAuth(lastRequest(h.relay), caller.key);
  });

  it('a bad key: AuthenticationError, status 401, code "" and type new_api_error, on every call', async () => {
    const bad = client(h, BAD_KEY);
    const calls: Array<() => PromiseLike<unknown>> = [
      () => bad.chat.completions.create({ model: FREE, messages: hi }),
      () => bad.chat.completions.create({ model: FREE, messages: hi, stream: true }),
      () => bad.responses.create({ model: FREE, input: 'hi' }),
      () => bad.models.list(),
    ];
    await expectEachRejected(calls, (err) => {
      expect(err).toBeInstanceOf(AuthenticationError);
      const e = err as AuthenticationError;
      expect(e.status).toBe(401);
      expect(e.code).toBe('');
      expect(e.type).toBe('new_api_error');
      const m = REQUEST_ID_SUFFIX.exec(String((e.error as { message?: string }).message));
      expect(m?.[1]).toBe(e.headers.get('x-oneapi-request-id'));
    });
    expect(h.relay.requests).toHaveLength(0);
  });

  it('leaving the for-await loop mid-stream frees the relay connection', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 50 });
    const stream = await caller.sdk.chat.completions.create({ model: FREE, messages: hi, stream: true });
    let n = 0;
    for await (const _chunk of stream) {
      if (++n === 2) break;
    }
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
    expect(h.relay.requests).toHaveLength(1);
  });

  it('stream.controller.abort() mid-stream ends the loop quietly and frees the relay connection', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 50 });
    const stream = await caller.sdk.responses.create({ model: FREE, input: 'hi', stream: true });
    let deltas = 0;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') {
        deltas++;
        stream.controller.abort(); // the SDK ends the loop without throwing
      }
    }
    expect(deltas).toBe(1);
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
  });

  it('aborting while the relay has not answered yet frees the relay connection too', async () => {
    h.relay.behave(() => true, { delayMs: 5_000 });
    const ac = new AbortController();
    const pending = caller.sdk.chat.completions.create({ model: FREE, messages: hi, stream: true }, { signal: ac.signal });
    await h.relay.waitFor((rs) => rs.length === 1);
    ac.abort();
    expect(await rejectionOf(pending)).toBeInstanceOf(APIUserAbortError);
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
  });

  it('an AbortSignal passed as a request option ends the stream the same way', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 50 });
    const ac = new AbortController();
    const stream = await caller.sdk.chat.completions.create({ model: FREE, messages: hi, stream: true }, { signal: ac.signal });
    let chunks = 0;
    for await (const _chunk of stream) {
      chunks++;
      ac.abort();
    }
    expect(chunks).toBe(1);
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
    // A call started with an already-aborted signal never leaves the process.
    const before = h.relay.requests.length;
    expect(await rejectionOf(caller.sdk.chat.completions.create({ model: FREE, messages: hi }, { signal: ac.signal }))).toBeInstanceOf(APIUserAbortError);
    expect(h.relay.requests).toHaveLength(before);
  });
});

describe.each(STORE_KINDS)('openai SDK through sluice: free-tier errors on the %s store', (kind) => {
  const { h, clock } = useFreeTierHarness(kind);

  it('over the window: RateLimitError 429, code free_tier_rate_limited, Retry-After in err.headers', async () => {
    const openai = client(h, await freshKey(h, 'oa-429'));
    for (let i = 0; i < 20; i++) {
      const res = await openai.chat.completions.create({ model: FREE, messages: hi });
      expect(res.choices[0]?.message.content).toBe(STANDIN_TEXT);
    }
    const calls: Array<() => PromiseLike<unknown>> = [
      () => openai.chat.completions.create({ model: FREE, messages: hi }),
      () => openai.chat.completions.create({ model: FREE, messages: hi, stream: true }),
      () => openai.responses.create({ model: FREE, input: 'hi' }),
      () => openai.responses.create({ model: FREE, input: 'hi', stream: true }),
    ];
    for (const call of calls) {
      const err = await rejectionOf(call());
      expect(err).toBeInstanceOf(RateLimitError);
      const e = err as RateLimitError;
      expect(e.status).toBe(429);
      expect(e.code).toBe('free_tier_rate_limited');
      expect(e.type).toBe('new_api_error');
      expect(e.headers.get('retry-after')).toBe('60');
      expect(e.message).toMatch(/^429 /);
    }
    expect(h.relay.requests).toHaveLength(20);

    // The paid counterpart is not limited.
    const paid = await openai.chat.completions.create({ model: PAID, messages: hi });
    expect(paid.choices[0]?.message.content).toBe(STANDIN_TEXT);

    // Waiting what Retry-After said lets the caller in again.
    clock.advance(60_000);
    const again = await openai.chat.completions.create({ model: FREE, messages: hi });
    expect(again.choices[0]?.message.content).toBe(STANDIN_TEXT);
  });

  it('over the day: APIError 402, code free_tier_daily_exhausted; the SDK does not retry it', async () => {
    const key = await freshKey(h, 'oa-day');
    const openai = client(h, key);
    await spendTheDay(
      clock,
      () => openai.chat.completions.create({ model: FREE, messages: hi }),
      () => openai.responses.create({ model: FREE, input: 'hi' }),
    );

    // Default retries (maxRetries 2): a 402 is not retryable for the SDK, so one attempt only.
    const counter = countingFetch();
    const withRetries = new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, fetch: counter.fetch });
    const calls = [false, true].map((stream) => () => withRetries.chat.completions.create({ model: FREE, messages: hi, stream }));
    await expectEachRejectedOnce(counter, 402, calls, (err) => {
      const e = expect402(err, 'free_tier_daily_exhausted');
      expect(e.type).toBe('new_api_error');
      // Not in the contract, but sent: the seconds until 00:00 Beijing time.
      expect(Number(e.headers?.get('retry-after'))).toBe((BEIJING_NOON + 12 * 3_600_000 - clock.now()) / 1000);
    });
    expect(h.relay.requests).toHaveLength(25);
  });

  it('relay busy (its 429 on an admitted free call): APIError 402, code free_tier_exhausted, Retry-After 30; no SDK retry', async () => {
    h.relay.behave(() => true, { status: 429 });
    const counter = countingFetch();
    const openai = new OpenAI({ apiKey: await freshKey(h, 'oa-busy'), baseURL: `${h.url}/v1`, fetch: counter.fetch });
    const calls: Array<() => PromiseLike<unknown>> = [
      () => openai.chat.completions.create({ model: FREE, messages: hi }),
      () => openai.chat.completions.create({ model: FREE, messages: hi, stream: true }),
      () => openai.responses.create({ model: FREE, input: 'hi', stream: true }),
    ];
    await expectEachRejectedOnce(counter, 402, calls, (err) => {
      expect(expect402(err, 'free_tier_exhausted').headers?.get('retry-after')).toBe('30');
    });
    expect(h.relay.requests).toHaveLength(3);
  });
});

describe('openai SDK through sluice: its own retries on the free-tier 429', () => {
  const h = useHarness(ONE_FREE_CALL_A_SECOND);

  it('a default client (maxRetries 2) waits Retry-After and retries the 429 itself; the caller sees success', async () => {
    const counter = countingFetch();
    const openai = new OpenAI({ apiKey: await freshKey(h, 'oa-retry'), baseURL: `${h.url}/v1`, fetch: counter.fetch });
    await openai.chat.completions.create({ model: FREE, messages: hi });
    const res = await openai.chat.completions.create({ model: FREE, messages: hi });
    expect(res.choices[0]?.message.content).toBe(STANDIN_TEXT);
    expectRetriedAfterRetryAfter(h, counter);
  });

  it('a streaming call is retried the same way (the retry happens before any event)', async () => {
    const counter = countingFetch();
    const openai = new OpenAI({ apiKey: await freshKey(h, 'oa-retry-s'), baseURL: `${h.url}/v1`, fetch: counter.fetch });
    await openai.chat.completions.create({ model: FREE, messages: hi });
    const stream = await openai.chat.completions.create({ model: FREE, messages: hi, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(STANDIN_TEXT);
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429, 200]);
  });

  it('maxRetries: 0 as a request option turns the retry off: the 429 reaches the caller at once', async () => {
    const counter = countingFetch();
    const openai = new OpenAI({ apiKey: await freshKey(h, 'oa-noretry'), baseURL: `${h.url}/v1`, fetch: counter.fetch });
    await openai.chat.completions.create({ model: FREE, messages: hi });
    const err = await rejectionOf(openai.chat.completions.create({ model: FREE, messages: hi }, { maxRetries: 0 }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).code).toBe('free_tier_rate_limited');
    expect((err as RateLimitError).headers.get('retry-after')).toBe('1');
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429]);
  });
});
