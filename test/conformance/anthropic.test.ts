/**
 * Conformance: the official `@anthropic-ai/sdk` (1.12) with its base URL pointed at sluice, the
 * relay stand-in behind it, in both header forms a messages-protocol client can send:
 *  - the SDK's own default: `Authorization: Bearer <key>` and `anthropic-version: 2026-10-21`;
 *  - the contract's form: `x-api-key: <key>` and `anthropic-version: 2023-06-01` (set through
 *    `defaultHeaders`, with the SDK's `Authorization` removed).
 * sluice's errors are OpenAI-shaped on every route, so the SDK's `err.error` is the whole body
 * `{ error: { code, message, type } }`: the code is `err.error.error.code`.
 */
import { describe, expect, it } from 'vitest';
import Anthropic, { type APIError, APIUserAbortError, AuthenticationError, PaymentRequiredError, RateLimitError, type ClientOptions } from '@anthropic-ai/sdk';
import { STORE_KINDS, useHarness, type Harness } from '../support/harness.js';
import { bodyJson, lastRequest, rejectionOf } from '../support/helpers.js';
import { expectStandinMessageStream } from '../support/sdk.js';
import { STANDIN_MODELS, STANDIN_TEXT } from '../../demo/relay.js';
import { BAD_KEY, FREE, PAID, REQUEST_ID_SUFFIX, countingFetch, expectEachRejected, expectForwardedAuth, freshKey, hi, useKeyedClient } from './support.js';
import { ONE_FREE_CALL_A_SECOND, expectEachRejectedOnce, expectRetriedAfterRetryAfter, spendTheDay, useFreeTierHarness } from './free-tier.js';

const params = (model = FREE): Anthropic.MessageCreateParamsNonStreaming => ({ model, max_tokens: 64, messages: hi });

type HeaderForm = 'sdk-default' | 'x-api-key';

/** The SDK's own default headers, or the contract's x-api-key + 2023-06-01 form. */
function client(h: Harness, key: string, form: HeaderForm, opts: Partial<ClientOptions> = {}): Anthropic {
  return new Anthropic({
    apiKey: key,
    baseURL: h.url,
    maxRetries: 0,
    ...(form === 'x-api-key' ? { defaultHeaders: { 'x-api-key': key, authorization: null, 'anthropic-version': '2023-06-01' } } : {}),
    ...opts,
  });
}

const VERSION: Record<HeaderForm, RegExp> = { 'sdk-default': /^2026-10-21$/, 'x-api-key': /^2023-06-01$/ };

/** The code a caller can read: `err.error` is the JSON body, `{ error: { code, message, type } }`. */
function codeOf(err: unknown): string | undefined {
  return ((err as APIError).error as { error?: { code?: string } } | undefined)?.error?.code;
}

/** A 402 as this SDK raises it: a PaymentRequiredError with `code`. */
function expect402(err: unknown, code: string): PaymentRequiredError {
  expect(err).toBeInstanceOf(PaymentRequiredError);
  const e = err as PaymentRequiredError;
  expect(e.status).toBe(402);
  expect(codeOf(e)).toBe(code);
  return e;
}

describe.each<HeaderForm>(['sdk-default', 'x-api-key'])('anthropic SDK through sluice (%s headers): calls', (form) => {
  const h = useHarness({ store: 'redis' });
  const caller = useKeyedClient(h, 'an', (key) => client(h, key, form));

  it('messages.create', async () => {
    const msg = await caller.sdk.messages.create(params());
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.model).toBe(FREE);
    expect(msg.stop_reason).toBe('end_turn');
    const block = msg.content[0];
    expect(block?.type === 'text' ? block.text : undefined).toBe(STANDIN_TEXT);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);

    const r = lastRequest(h.relay);
    expect(r.url).toBe('/v1/messages');
    expectForwardedAuth(r, caller.key, form === 'x-api-key' ? 'x-api-key' : 'authorization');
    expect(r.headers['anthropic-version']).toMatch(VERSION[form]);
    expect(bodyJson(r)).toMatchObject({ model: FREE, max_tokens: 64 });
  });

  it('messages.stream yields the complete text, the stop reason and usage', async () => {
    h.relay.behave(() => true, { sseEvents: 12 });
    await expectStandinMessageStream(caller.sdk.messages.stream(params()));
    const r = lastRequest(h.relay);
    expect(bodyJson(r)['stream']).toBe(true);
    expect(r.headers['anthropic-version']).toMatch(VERSION[form]);
    expect(r.closedEarly).toBe(false);
  });

  it('the stream reaches the SDK as the relay wrote it: named events from message_start to message_stop', async () => {
    const res = await caller.sdk.messages.create({ ...params(), stream: true }).asResponse();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const frames = (await res.text()).split('\n\n').filter((f) => f !== '');
    const events = frames.map((f) => /^event: (\S+)\ndata: /.exec(f)?.[1]);
    expect(events[0]).toBe('message_start');
    expect(events).toContain('ping');
    expect(events.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    const delta = JSON.parse(frames.at(-2)!.split('\ndata: ')[1]!) as { usage: { output_tokens: number } };
    expect(delta.usage.output_tokens).toBeGreaterThan(0);
  });

  it('messages.create with stream: true yields the event sequence up to message_stop', async () => {
    const stream = await caller.sdk.messages.create({ ...params(), stream: true });
    const types: string[] = [];
    let text = '';
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    }
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(text).toBe(STANDIN_TEXT);
  });

  it('models.list gets what the relay answers this SDK directly: the Anthropic shape for x-api-key with anthropic-version', async () => {
    const items = async (c: Anthropic): Promise<unknown[]> => {
      const out: unknown[] = [];
      for await (const m of c.models.list()) out.push(m);
      return out;
    };
    const through = await items(caller.sdk);
    const r = lastRequest(h.relay);
    expect(r.url.split('?')[0]).toBe('/v1/models');
    expectForwardedAuth(r, caller.key, form === 'x-api-key' ? 'x-api-key' : 'authorization');
    // new-api answers Anthropic's list only to x-api-key with anthropic-version; the SDK's own
    // default (Authorization) gets OpenAI's list from the relay itself, and so through sluice.
    const direct = await items(client({ ...h, url: h.relay.url } as Harness, caller.key, form));
    expect(through).toEqual(direct);
    expect(through.map((m) => (m as { id: string }).id)).toEqual([...STANDIN_MODELS]);
    for (const m of through) {
      if (form === 'x-api-key') expect(m).toMatchObject({ type: 'model', display_name: (m as { id: string }).id });
      else expect(m).toMatchObject({ object: 'model', owned_by: 'custom' });
    }
  });

  it('a bad key: AuthenticationError, status 401, err.error.error.code "" and type new_api_error', async () => {
    const bad = client(h, BAD_KEY, form);
    const calls: Array<() => PromiseLike<unknown>> = [() => bad.messages.create(params()), () => bad.messages.stream(params()).finalText(), () => bad.models.list()];
    await expectEachRejected(calls, (err) => {
      expect(err).toBeInstanceOf(AuthenticationError);
      const e = err as AuthenticationError;
      expect(e.status).toBe(401);
      expect(codeOf(e)).toBe('');
      expect(e.type).toBe('new_api_error');
      expect(e.apiMessage).toMatch(REQUEST_ID_SUFFIX);
      expect(REQUEST_ID_SUFFIX.exec(e.apiMessage ?? '')?.[1]).toBe(e.headers.get('x-oneapi-request-id'));
      expect(e.errorCode).toBeNull(); // the SDK's own field reads error.details.error_code, absent here
    });
    expect(h.relay.requests).toHaveLength(0);
  });

  it('stream.abort() mid-stream frees the relay connection', async () => {
    h.relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 50 });
    const stream = caller.sdk.messages.stream(params());
    let deltas = 0;
    stream.on('streamEvent', (ev) => {
      if (ev.type === 'content_block_delta' && ++deltas === 2) stream.abort();
    });
    const err = await rejectionOf(stream.done());
    expect(err).toBeInstanceOf(APIUserAbortError);
    expect(stream.aborted).toBe(true);
    await h.relay.waitFor((rs) => rs.some((r) => r.closedEarly), 3_000);
    expect(h.relay.requests).toHaveLength(1);
  });
});

describe('anthropic SDK through sluice: the x-api-key header counts only where the contract says', () => {
  const h = useHarness({ store: 'redis' }, { resetRelay: false });

  it('x-api-key alone on another endpoint (GET /v1/files) is a 401 AuthenticationError', async () => {
    const key = await freshKey(h, 'an-files');
    const err = await rejectionOf(client(h, key, 'x-api-key').beta.files.list());
    expect(err).toBeInstanceOf(AuthenticationError);
    expect((err as AuthenticationError).status).toBe(401);
    expect(h.relay.requests).toHaveLength(0);
    // The same key as Bearer (the SDK default) passes sluice there.
    await client(h, key, 'sdk-default')
      .beta.files.list()
      .then(
        () => undefined,
        (e: unknown) => expect((e as APIError).status).not.toBe(401),
      );
    expect(h.relay.requests.map((r) => r.url.split('?')[0])).toEqual(['/v1/files']);
  });
});

describe.each(STORE_KINDS)('anthropic SDK through sluice: free-tier errors on the %s store', (kind) => {
  const { h, clock } = useFreeTierHarness(kind);

  it('over the window: RateLimitError 429, code free_tier_rate_limited, Retry-After in err.headers (both header forms)', async () => {
    const key = await freshKey(h, 'an-429');
    const classic = client(h, key, 'x-api-key');
    const bearer = client(h, key, 'sdk-default');
    for (let i = 0; i < 20; i++) {
      const msg = await (i % 2 === 0 ? classic : bearer).messages.create(params());
      expect(msg.content[0]?.type).toBe('text');
    }
    for (const a of [classic, bearer]) {
      const calls: Array<() => PromiseLike<unknown>> = [
        () => a.messages.create(params()),
        () => a.messages.stream(params()).finalText(),
        () => a.messages.create({ ...params(), stream: true }),
      ];
      for (const call of calls) {
        const err = await rejectionOf(call());
        expect(err).toBeInstanceOf(RateLimitError);
        const e = err as RateLimitError;
        expect(e.status).toBe(429);
        expect(codeOf(e)).toBe('free_tier_rate_limited');
        expect(e.type).toBe('new_api_error');
        expect(e.headers.get('retry-after')).toBe('60');
      }
    }
    expect(h.relay.requests).toHaveLength(20);

    // The paid counterpart is not limited.
    expect((await classic.messages.create(params(PAID))).content[0]?.type).toBe('text');
    clock.advance(60_000);
    expect((await classic.messages.create(params())).content[0]?.type).toBe('text');
  });

  it('over the day: PaymentRequiredError 402, code free_tier_daily_exhausted; the SDK does not retry it', async () => {
    const key = await freshKey(h, 'an-day');
    const anthropic = client(h, key, 'x-api-key');
    await spendTheDay(
      clock,
      () => anthropic.messages.create(params()),
      () => anthropic.messages.stream(params()).finalText(),
    );

    const counter = countingFetch();
    const withRetries = new Anthropic({
      apiKey: key,
      baseURL: h.url,
      fetch: counter.fetch, // default maxRetries: 2
      defaultHeaders: { 'x-api-key': key, authorization: null, 'anthropic-version': '2023-06-01' },
    });
    const calls: Array<() => PromiseLike<unknown>> = [() => withRetries.messages.create(params()), () => withRetries.messages.stream(params()).finalMessage()];
    await expectEachRejectedOnce(counter, 402, calls, (err) => {
      expect(expect402(err, 'free_tier_daily_exhausted').type).toBe('new_api_error');
    });
    expect(h.relay.requests).toHaveLength(25);
  });

  it('relay busy (its 429 on an admitted free call): PaymentRequiredError 402, code free_tier_exhausted, Retry-After 30; no SDK retry', async () => {
    h.relay.behave(() => true, { status: 429 });
    const counter = countingFetch();
    const anthropic = new Anthropic({ apiKey: await freshKey(h, 'an-busy'), baseURL: h.url, fetch: counter.fetch });
    const calls = [() => anthropic.messages.create(params()), () => anthropic.messages.stream(params()).finalText()];
    await expectEachRejectedOnce(counter, 402, calls, (err) => {
      expect(expect402(err, 'free_tier_exhausted').headers.get('retry-after')).toBe('30');
    });
    expect(h.relay.requests).toHaveLength(2);
  });
});

describe("anthropic SDK through sluice: the relay's headers not in time", () => {
  const h = useHarness({ store: 'memory', file: { upstream: { headersTimeoutSeconds: 1 } } });
  const caller = useKeyedClient(h, 'an-slow', (key) => client(h, key, 'sdk-default', { maxRetries: 2 }));

  it('raises the 504 upstream_timeout without retrying it: the relay ran the call once, not three times', async () => {
    h.relay.behave(() => true, { delayMs: 4_000 });
    const err = await rejectionOf(caller.sdk.messages.create({ model: PAID, max_tokens: 16, messages: hi }));
    expect((err as APIError).status).toBe(504);
    expect(codeOf(err)).toBe('upstream_timeout');
    expect(h.relay.started).toBe(1);
  });
});

describe('anthropic SDK through sluice: its own retries on the free-tier 429', () => {
  const h = useHarness(ONE_FREE_CALL_A_SECOND);

  it('a default client (maxRetries 2) waits Retry-After and retries messages.stream itself; the caller sees the text', async () => {
    const counter = countingFetch();
    const key = await freshKey(h, 'an-retry');
    const anthropic = client(h, key, 'x-api-key', { fetch: counter.fetch, maxRetries: 2 });
    await anthropic.messages.create(params());
    expect(await anthropic.messages.stream(params()).finalText()).toBe(STANDIN_TEXT);
    expectRetriedAfterRetryAfter(h, counter);
  });

  it('maxRetries: 0 (client or request option) turns the retry off', async () => {
    const counter = countingFetch();
    const anthropic = client(h, await freshKey(h, 'an-noretry'), 'sdk-default', { fetch: counter.fetch, maxRetries: 2 });
    await anthropic.messages.create(params());
    const err = await rejectionOf(anthropic.messages.create(params(), { maxRetries: 0 }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect(codeOf(err)).toBe('free_tier_rate_limited');
    expect((err as RateLimitError).headers.get('retry-after')).toBe('1');
    expect(counter.attempts.map((a) => a.status)).toEqual([200, 429]);
  });
});
