/**
 * The relay stand-in driven DIRECTLY by the three official SDKs (no sidecar in between): if these
 * pass, the stand-in answers like a real relay and later tests through sluice can rely on it.
 */
import { request as httpRequest, Agent } from 'node:http';
import { randomBytes } from 'node:crypto';
import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import OpenAI, { APIError, RateLimitError } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { bodyJson, lastRequest, rejectionOf } from '../test/support/helpers.js';
import { expectStandinMessageStream, expectStandinModelList } from '../test/support/sdk.js';
import { STANDIN_MODELS, STANDIN_TEXT, standinDeltas, startRelayStandin } from './relay.js';
import type { RelayStandin } from './relay.js';

const KEY = 'sk-testkey';

let relay: RelayStandin;
let openai: OpenAI;
let anthropic: Anthropic;
let genai: GoogleGenAI;

beforeAll(async () => {
  relay = await startRelayStandin({ quiet: true });
  openai = new OpenAI({ apiKey: KEY, baseURL: `${relay.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: KEY, baseURL: relay.url, maxRetries: 0 });
  genai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: relay.url } });
});

afterAll(async () => {
  await relay.close();
});

beforeEach(() => {
  relay.reset();
});

describe('standinDeltas', () => {
  it('splits the text into n pieces that concatenate to it', () => {
    for (const n of [1, 2, 3, 7, 30, 100]) {
      const d = standinDeltas(n);
      expect(d).toHaveLength(n);
      expect(d.join('')).toBe(STANDIN_TEXT);
    }
  });
});

describe('openai SDK, directly against the stand-in', () => {
  it('chat.completions.create', async () => {
    const { data, response } = await openai.chat.completions.create({ model: 'vend-flash', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.model).toBe('vend-flash');
    expect(data.choices[0]?.message.content).toBe(STANDIN_TEXT);
    expect(data.choices[0]?.finish_reason).toBe('stop');
    expect(data.usage?.total_tokens).toBe((data.usage?.prompt_tokens ?? 0) + (data.usage?.completion_tokens ?? 0));
    expect(response.headers.get('x-oneapi-request-id')).toMatch(/^\d{17}[0-9a-f]{12}$/);

    const r = lastRequest(relay);
    expect(r.method).toBe('POST');
    expect(r.url).toBe('/v1/chat/completions');
    expect(r.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(r.headers['content-type']).toBe('application/json');
    expect(bodyJson(r)['model']).toBe('vend-flash');
    expect(r.closedEarly).toBe(false);
  });

  it('chat.completions.create with stream: true (and include_usage)', async () => {
    const stream = await openai.chat.completions.create({
      model: 'vend-flash-free',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let role: string | undefined;
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      expect(chunk.model).toBe('vend-flash-free');
      const choice = chunk.choices[0];
      if (choice) {
        role ??= choice.delta.role;
        text += choice.delta.content ?? '';
        finish = choice.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(STANDIN_TEXT);
    expect(role).toBe('assistant');
    expect(finish).toBe('stop');
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(bodyJson(lastRequest(relay))['stream']).toBe(true);
  });

  it('the number of deltas follows sseEvents', async () => {
    relay.behave(() => true, { sseEvents: 10 });
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const deltas: string[] = [];
    for await (const chunk of stream) {
      const c = chunk.choices[0]?.delta.content;
      if (c !== undefined && c !== null && c !== '') deltas.push(c);
    }
    expect(deltas).toEqual(standinDeltas(10));
    expect(deltas.join('')).toBe(STANDIN_TEXT);
  });

  it('responses.create', async () => {
    const resp = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi' });
    expect(resp.id).toMatch(/^resp_/);
    expect(resp.object).toBe('response');
    expect(resp.status).toBe('completed');
    expect(resp.model).toBe('gpt-4o-mini');
    expect(resp.output_text).toBe(STANDIN_TEXT);
    expect(resp.usage?.total_tokens).toBeGreaterThan(0);
    expect(lastRequest(relay).url).toBe('/v1/responses');
  });

  it('responses.create with stream: true yields typed events with sequence numbers', async () => {
    const stream = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true });
    const types: string[] = [];
    const seqs: number[] = [];
    let text = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      types.push(ev.type);
      seqs.push(ev.sequence_number);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(3);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect(text).toBe(STANDIN_TEXT);
    expect(completed?.status).toBe('completed');
  });

  it('responses.stream helper accumulates the final response', async () => {
    const stream = openai.responses.stream({ model: 'gpt-4o-mini', input: 'hi' });
    let deltas = '';
    stream.on('response.output_text.delta', (e) => {
      deltas += e.delta;
    });
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(STANDIN_TEXT);
    expect(deltas).toBe(STANDIN_TEXT);
  });

  it('models.list', async () => {
    await expectStandinModelList(openai);
    expect(lastRequest(relay).headers['authorization']).toBe(`Bearer ${KEY}`);
  });

  it('a behaviour with status 429 (empty body) makes the SDK throw RateLimitError', async () => {
    relay.behave((r) => r.url === '/v1/chat/completions', { status: 429, headers: { 'retry-after': '7' } });
    const err = await rejectionOf(openai.chat.completions.create({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'hi' }] }));
    expect(err).toBeInstanceOf(RateLimitError);
    const rl = err as RateLimitError;
    expect(rl.status).toBe(429);
    expect(rl.headers.get('retry-after')).toBe('7');
    expect(rl.headers.get('x-oneapi-request-id')).toBeTruthy();
    expect(relay.requests).toHaveLength(1);
  });

  it('stampHeader carries the monotonic clock at the moment the stream was answered', async () => {
    relay.behave(() => true, { delayMs: 30, stampHeader: 'X-Sent-Ns' });
    const asked = process.hrtime.bigint();
    const res = await fetch(`${relay.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vend-flash-free', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const got = process.hrtime.bigint();
    const sent = BigInt(res.headers.get('x-sent-ns') ?? '0');
    await res.text();
    // Written after the 30 ms wait (less a millisecond: libuv times from a cached loop clock),
    // before the headers reached us: both processes read the one monotonic clock.
    expect(sent - asked).toBeGreaterThanOrEqual(29_000_000n);
    expect(sent).toBeLessThanOrEqual(got);
  });

  it('later behaviours take precedence; a body behaviour answers exactly those bytes', async () => {
    const body = '{"error":{"code":"free_tier_exhausted","message":"busy","type":"new_api_error"}}';
    relay.behave(() => true, { status: 500 });
    relay.behave((r) => r.url === '/v1/chat/completions', { status: 402, body });
    const err = await rejectionOf(openai.chat.completions.create({ model: 'vend-flash-free', messages: [{ role: 'user', content: 'hi' }] }));
    expect(err).toBeInstanceOf(APIError);
    const api = err as APIError;
    expect(api.status).toBe(402);
    expect(api.code).toBe('free_tier_exhausted');

    const res = await fetch(`${relay.url}/v1/models`);
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('');
  });

  it('delayMs delays the answer', async () => {
    relay.behave(() => true, { delayMs: 200 });
    const t0 = Date.now();
    await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it('sseIntervalMs spaces the events, each written on its own', async () => {
    relay.behave(() => true, { sseIntervalMs: 100, sseEvents: 3 });
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const times: number[] = [];
    for await (const _chunk of stream) times.push(Date.now());
    // role + 3 deltas + finish = 5 chunks (then [DONE]), each ~100 ms apart.
    expect(times).toHaveLength(5);
    for (let i = 1; i < times.length; i++) {
      expect((times[i] ?? 0) - (times[i - 1] ?? 0)).toBeGreaterThanOrEqual(80);
    }
  });

  it('dieAfterEvents ends the client stream with an error', async () => {
    relay.behave(() => true, { dieAfterEvents: 2, sseEvents: 5 });
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    let text = '';
    const consume = async (): Promise<void> => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    };
    await expect(consume()).rejects.toThrow();
    expect(text).toBe(standinDeltas(5)[0]);
    expect(lastRequest(relay).closedEarly).toBe(false);
  });

  it('dieAfterEvents: 0 drops the connection without any answer', async () => {
    relay.behave(() => true, { dieAfterEvents: 0 });
    await expect(openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
    expect(relay.requests).toHaveLength(1);
  });

  it('a client abort mid-stream sets closedEarly and stops the stand-in writing', async () => {
    relay.behave(() => true, { sseIntervalMs: 30, sseEvents: 50 });
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    let n = 0;
    for await (const _chunk of stream) {
      if (++n === 2) break; // leaving the loop aborts the request
    }
    await relay.waitFor((rs) => rs[0]?.closedEarly === true, 2_000);
    expect(relay.requests[0]?.closedEarly).toBe(true);
  });
});

describe('anthropic SDK, directly against the stand-in', () => {
  it('messages.create', async () => {
    const msg = await anthropic.messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.model).toBe('claude-haiku-4-5');
    expect(msg.stop_reason).toBe('end_turn');
    const block = msg.content[0];
    expect(block?.type === 'text' ? block.text : undefined).toBe(STANDIN_TEXT);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);

    // Quirk of @anthropic-ai/sdk 1.x: `apiKey` is sent as `Authorization: Bearer`, not `x-api-key`,
    // and `anthropic-version` is the SDK's own API version (not 2023-06-01).
    const r = lastRequest(relay);
    expect(r.url).toBe('/v1/messages');
    expect(r.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(r.headers['x-api-key']).toBeUndefined();
    expect(r.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it('classic x-api-key + anthropic-version 2023-06-01 headers (set through defaultHeaders)', async () => {
    const classic = new Anthropic({
      apiKey: KEY,
      baseURL: relay.url,
      maxRetries: 0,
      defaultHeaders: { 'x-api-key': KEY, authorization: null, 'anthropic-version': '2023-06-01' },
    });
    const msg = await classic.messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const block = msg.content[0];
    expect(block?.type === 'text' ? block.text : undefined).toBe(STANDIN_TEXT);
    const ids: string[] = [];
    for await (const m of classic.models.list()) ids.push(m.id);
    expect(ids).toEqual([...STANDIN_MODELS]);
    for (const r of relay.requests) {
      expect(r.headers['x-api-key']).toBe(KEY);
      expect(r.headers['authorization']).toBeUndefined();
      expect(r.headers['anthropic-version']).toBe('2023-06-01');
    }
    expect(relay.requests.map((r) => r.url.split('?')[0])).toEqual(['/v1/messages', '/v1/models']);
  });

  it('messages.stream', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await expectStandinMessageStream(stream);
    expect(bodyJson(lastRequest(relay))['stream']).toBe(true);
  });

  it('messages.create with stream: true yields the raw event sequence', async () => {
    const stream = await anthropic.messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    // `ping` is swallowed by the SDK.
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
  });

  it('models.list answers the Anthropic shape only for x-api-key with anthropic-version, as new-api chooses', async () => {
    const classic = new Anthropic({
      apiKey: KEY,
      baseURL: relay.url,
      maxRetries: 0,
      defaultHeaders: { 'x-api-key': KEY, authorization: null, 'anthropic-version': '2023-06-01' },
    });
    const ids: string[] = [];
    for await (const m of classic.models.list()) {
      expect(m.type).toBe('model');
      expect(m.display_name).toBe(m.id);
      expect(m.created_at).toBe('2021-07-20T10:40:00Z');
      ids.push(m.id);
    }
    expect(ids).toEqual([...STANDIN_MODELS]);
    expect(lastRequest(relay).key).toBe(KEY);

    // The SDK's own default sends the key as Authorization: new-api lists OpenAI's shape then.
    const page = await anthropic.models.list();
    const first = page.data[0] as unknown as Record<string, unknown>;
    expect(first).toMatchObject({ id: STANDIN_MODELS[0], object: 'model', owned_by: 'custom' });
    expect(first['type']).toBeUndefined();
  });

  it('dieAfterEvents ends messages.stream with an error after the events it let through', async () => {
    // message_start, content_block_start, ping, then the first text delta: 4 events.
    relay.behave(() => true, { dieAfterEvents: 4, sseEvents: 5 });
    const stream = anthropic.messages.stream({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    });
    let text = '';
    stream.on('text', (t) => {
      text += t;
    });
    stream.on('error', () => {
      /* also rejected through finalText */
    });
    const err = await rejectionOf(stream.finalText());
    // A cut connection, not an HTTP error answer.
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(Anthropic.APIError);
    expect(text).toBe(standinDeltas(5)[0]);
    expect(lastRequest(relay).closedEarly).toBe(false);
  });
});

describe('google genai SDK, directly against the stand-in', () => {
  it('models.generateContent', async () => {
    const res = await genai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' });
    expect(res.text).toBe(STANDIN_TEXT);
    expect(res.candidates?.[0]?.finishReason).toBe('STOP');
    expect(res.usageMetadata?.totalTokenCount).toBeGreaterThan(0);
    expect(res.modelVersion).toBe('gemini-2.5-flash');

    const r = lastRequest(relay);
    expect(r.url).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(r.headers['x-goog-api-key']).toBe(KEY);
    expect(r.headers['authorization']).toBeUndefined();
    expect(bodyJson(r)['contents']).toEqual([{ role: 'user', parts: [{ text: 'hi' }] }]);
  });

  it('models.generateContentStream', async () => {
    const stream = await genai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'hi' });
    let text = '';
    let chunks = 0;
    let finish: string | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.text ?? '';
      finish = chunk.candidates?.[0]?.finishReason ?? finish;
    }
    expect(chunks).toBe(3);
    expect(text).toBe(STANDIN_TEXT);
    expect(finish).toBe('STOP');
    expect(lastRequest(relay).url).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
  });

  it('apiVersion v1 uses /v1/models/{model}:generateContent', async () => {
    const v1 = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: relay.url, apiVersion: 'v1' } });
    const res = await v1.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' });
    expect(res.text).toBe(STANDIN_TEXT);
    expect(lastRequest(relay).url).toBe('/v1/models/gemini-2.5-flash:generateContent');
  });

  it("models.list reads new-api's Gemini list (names without models/, no page token)", async () => {
    const names: string[] = [];
    for await (const m of await genai.models.list()) names.push(m.name ?? '');
    expect(names).toEqual([...STANDIN_MODELS]);
    const r = lastRequest(relay);
    expect(r.url.split('?')[0]).toBe('/v1beta/models');
    expect(r.key).toBe(KEY);
  });

  it('dieAfterEvents ends generateContentStream with an error', async () => {
    relay.behave(() => true, { dieAfterEvents: 1, sseEvents: 5 });
    const stream = await genai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'hi' });
    let text = '';
    const consume = async (): Promise<void> => {
      for await (const chunk of stream) text += chunk.text ?? '';
    };
    await expect(consume()).rejects.toThrow();
    expect(text).toBe(standinDeltas(5)[0]);
  });
});

describe('plain HTTP', () => {
  it('echo returns the exact request bytes (10 MB binary) and content-type', async () => {
    relay.behave((r) => r.url === '/echo', { echo: true });
    const payload = randomBytes(10 * 1024 * 1024);
    const res = await fetch(`${relay.url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-test-bytes' },
      body: payload,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-test-bytes');
    expect(res.headers.get('x-oneapi-request-id')).toBeTruthy();
    const got = Buffer.from(await res.arrayBuffer());
    expect(got.length).toBe(payload.length);
    expect(got.equals(payload)).toBe(true);
    expect(lastRequest(relay).body.equals(payload)).toBe(true);
  });

  it('new-api query endpoints and the 404 shape', async () => {
    const usage = await fetch(`${relay.url}/api/usage/token/`);
    expect(usage.status).toBe(200);
    expect(await usage.json()).toMatchObject({ code: true, message: 'ok', data: { object: 'token_usage', name: 'demo' } });

    const logs = await fetch(`${relay.url}/api/log/token?key=x`);
    expect(await logs.json()).toEqual({ success: true, message: '', data: [] });

    const other = await fetch(`${relay.url}/api/status`);
    expect(other.status).toBe(200);
    const dash = await fetch(`${relay.url}/v1/dashboard/billing/usage`);
    expect(dash.status).toBe(200);
    expect(dash.headers.get('content-type')).toMatch(/^application\/json/);

    const missing = await fetch(`${relay.url}/v1/nope`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-oneapi-request-id')).toBeTruthy();
    expect(await missing.json()).toEqual({ error: { message: 'Invalid URL (POST /v1/nope)', type: 'invalid_request_error', param: '', code: '' } });
    // Outside /v1 and /api new-api serves its console's page for any path.
    const page = await fetch(`${relay.url}/nope`, { method: 'POST', body: '{}' });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  });

  it('uses keep-alive; reset clears requests, counts and behaviours', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(`${relay.url}${path}`, { agent }, (res) => {
          const port = res.socket.localPort ?? -1;
          res.resume();
          res.on('end', () => resolve(port));
        });
        req.on('error', reject);
        req.end();
      });
    const p1 = await get('/api/status');
    const p2 = await get('/api/status');
    expect(p2).toBe(p1);
    expect(relay.requests).toHaveLength(2);
    agent.destroy();

    relay.behave(() => true, { status: 503 });
    relay.reset();
    expect(relay.requests).toHaveLength(0);
    expect(relay.started).toBe(0);
    const res = await fetch(`${relay.url}/api/status`);
    expect(res.status).toBe(200);
  });

  it('streamGenerateContent without alt=sse streams one JSON array', async () => {
    const res = await fetch(`${relay.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}',
    });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const chunks = (await res.json()) as { candidates: { content: { parts: { text: string }[] } }[] }[];
    expect(chunks).toHaveLength(3);
    expect(chunks.map((c) => c.candidates[0]?.content.parts[0]?.text ?? '').join('')).toBe(STANDIN_TEXT);
  });

  it('a client that leaves during delayMs is marked closedEarly', async () => {
    relay.behave(() => true, { delayMs: 5_000 });
    const ac = new AbortController();
    const pending = fetch(`${relay.url}/v1/chat/completions`, { method: 'POST', body: '{}', signal: ac.signal });
    await relay.waitFor((rs) => rs.length === 1);
    ac.abort();
    await expect(pending).rejects.toThrow();
    await relay.waitFor((rs) => rs[0]?.closedEarly === true, 2_000);
  });

  it('maxRecorded keeps only the newest requests', async () => {
    const small = await startRelayStandin({ quiet: true, maxRecorded: 2 });
    try {
      for (const p of ['/api/a', '/api/b', '/api/c']) await (await fetch(`${small.url}${p}`)).text();
      expect(small.requests.map((r) => r.url)).toEqual(['/api/b', '/api/c']);
    } finally {
      await small.close();
    }
  });

  it('waitFor times out with a clear error', async () => {
    await expect(relay.waitFor((rs) => rs.length > 5, 50)).rejects.toThrow(/timed out/);
  });
});

describe('new-api rules the stand-in keeps (demo/new-api.ts)', () => {
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${relay.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, ...headers }, body });

  it('records the model the distributor read, by Content-Type', async () => {
    await post('/v1/chat/completions', '{"model":"vend-flash-free","messages":[]}', { 'content-type': 'application/json' });
    expect(lastRequest(relay).model).toBe('vend-flash-free');
    await post('/v1/embeddings', 'model=vend-flash-free&input=hi', { 'content-type': 'text/plain; x=application/x-www-form-urlencoded' });
    expect(lastRequest(relay).model).toBe('vend-flash-free');
    const form = new FormData();
    form.set('model', 'vend-flash-free');
    form.set('prompt', 'a cat');
    await fetch(`${relay.url}/v1/videos`, { method: 'POST', body: form });
    expect(lastRequest(relay).model).toBe('vend-flash-free');
    await post('/v1beta/models/vend-flash-free:generateContent', '{}', { 'content-type': 'application/json' });
    expect(lastRequest(relay).model).toBe('vend-flash-free');
    await fetch(`${relay.url}/v1/realtime?model=vend-flash-free`);
    expect(lastRequest(relay).model).toBe('vend-flash-free');
    await fetch(`${relay.url}/v1/models`);
    expect(lastRequest(relay).model).toBeUndefined();
  });

  it("answers the distributor's 400s in new-api's shape", async () => {
    const cases: Array<[string, string, Record<string, string>, RegExp]> = [
      ['/v1/chat/completions', '{"model":', { 'content-type': 'application/json' }, /^Invalid request: Invalid request: invalid JSON request body \(request id: \w+\)$/],
      ['/v1/chat/completions', '{"model":"vend-flash-free"}', { 'content-type': 'text/plain' }, /^Model name not specified, model name cannot be empty \(request id: /],
      ['/v1/chat/completions', 'model=a&model=b', { 'content-type': 'application/x-www-form-urlencoded' }, /cannot unmarshal array/],
      ['/v1/chat/completions', 'model=a;b=c', { 'content-type': 'application/x-www-form-urlencoded' }, /invalid form body/],
    ];
    for (const [path, body, headers, message] of cases) {
      const res = await post(path, body, headers);
      expect(res.status).toBe(400);
      const got = (await res.json()) as { error: { code: string; message: string; type: string } };
      expect(Object.keys(got.error)).toEqual(['code', 'message', 'type']);
      expect(got.error).toMatchObject({ code: '', type: 'new_api_error' });
      expect(got.error.message).toMatch(message);
      expect(lastRequest(relay).modelError).toBeDefined();
    }
  });

  it('records the key TokenAuth reads: x-api-key on /v1/messages and /v1/models, x-goog-api-key and ?key= under /v1beta/models and /v1/models/, a WebSocket protocol anywhere', async () => {
    const at = async (path: string, headers: Record<string, string>): Promise<string> => {
      await fetch(`${relay.url}${path}`, { headers });
      return lastRequest(relay).key;
    };
    expect(await at('/v1/models', { authorization: 'Bearer sk-a', 'x-api-key': 'sk-b' })).toBe('sk-b');
    expect(await at('/v1/chat/completions', { authorization: 'Bearer sk-a', 'x-api-key': 'sk-b' })).toBe('sk-a');
    expect(await at('/v1beta/models/x:generateContent?key=sk-q', { authorization: 'Bearer sk-a' })).toBe('sk-q');
    expect(await at('/v1/models/x:generateContent?key=sk-q', { authorization: 'Bearer sk-a', 'x-goog-api-key': 'sk-g' })).toBe('sk-g');
    expect(await at('/v1/models?key=sk-q', { authorization: 'Bearer sk-a', 'x-goog-api-key': 'sk-g' })).toBe('sk-a');
    expect(await at('/v1/chat/completions', { authorization: 'Bearer sk-a', 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-w' })).toBe('sk-w');
  });

  it('looks up the part before the first "-" and answers a channel asked for by a non-administrator 403, as TokenAuth does', async () => {
    const admin = await startRelayStandin({ quiet: true, adminKeys: ['boss'] });
    try {
      const call = async (base: string, path: string, key: string) => {
        const res = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"model":"gpt-4o"}' });
        return {
          status: res.status,
          channelHeader: res.headers.get('specific_channel_version'),
          body: (await res.json()) as { error?: { code: string; message: string; type: string } },
        };
      };
      const refused = await call(relay.url, '/v1/chat/completions', 'sk-abc-7');
      expect(refused.status).toBe(403);
      expect(refused.channelHeader).toBe('701e3ae1dc3f7975556d354e0675168d004891c8');
      expect(Object.keys(refused.body.error!)).toEqual(['code', 'message', 'type']);
      expect(refused.body.error).toMatchObject({ code: '', type: 'new_api_error' });
      expect(refused.body.error!.message).toMatch(/^普通用户不支持指定渠道 \(request id: \w+\)$/);
      expect(lastRequest(relay)).toMatchObject({ key: 'sk-abc-7', tokenKey: 'abc', channel: '7' });
      // An empty suffix still asks for a channel (Go's Split gives two parts); a third part is ignored.
      expect((await call(relay.url, '/v1/chat/completions', 'abc-')).status).toBe(403);
      expect(lastRequest(relay)).toMatchObject({ tokenKey: 'abc', channel: '' });
      expect((await call(relay.url, '/v1/chat/completions', 'sk-abc')).status).toBe(200);
      expect(lastRequest(relay)).toMatchObject({ tokenKey: 'abc', channel: null });
      // An administrator's token gets its channel; the usage endpoints and the console's playground ask for none.
      expect((await call(admin.url, '/v1/chat/completions', 'sk-boss-7-x')).status).toBe(200);
      expect(admin.requests.at(-1)).toMatchObject({ tokenKey: 'boss', channel: '7' });
      expect((await fetch(`${relay.url}/api/usage/token/`, { headers: { authorization: 'Bearer sk-abc-7' } })).status).toBe(200);
      expect((await call(relay.url, '/pg/chat/completions', 'sk-abc-7')).status).toBe(200);
    } finally {
      await admin.close();
    }
  });

  it('answers GET /v1/models in the format new-api picks by headers', async () => {
    const list = async (headers: Record<string, string>, query = ''): Promise<Record<string, unknown>> =>
      (await (await fetch(`${relay.url}/v1/models${query}`, { headers })).json()) as Record<string, unknown>;
    expect(Object.keys(await list({ authorization: 'Bearer k' }))).toEqual(['data', 'object', 'success']);
    expect(Object.keys(await list({ 'x-api-key': 'k', 'anthropic-version': '2023-06-01' }))).toEqual(['data', 'first_id', 'has_more', 'last_id']);
    expect(Object.keys(await list({ 'x-api-key': 'k' }))).toEqual(['data', 'object', 'success']); // both headers or none
    // x-goog-api-key (or ?key=) sends new-api to a model lookup of "" there: 200 with an error body.
    const gemini = { error: { message: "The model '' does not exist", type: 'invalid_request_error', param: 'model', code: 'model_not_found' } };
    expect(await list({ authorization: 'Bearer k', 'x-goog-api-key': 'k' })).toEqual(gemini);
    expect(await list({ authorization: 'Bearer k' }, '?key=k')).toEqual(gemini);
    const beta = (await (await fetch(`${relay.url}/v1beta/models`)).json()) as { models: unknown[]; nextPageToken: null };
    expect(beta.nextPageToken).toBeNull();
    expect(beta.models[0]).toEqual({
      name: STANDIN_MODELS[0],
      baseModelId: null,
      version: null,
      displayName: STANDIN_MODELS[0],
      description: null,
      inputTokenLimit: null,
      outputTokenLimit: null,
      supportedGenerationMethods: null,
    });
  });

  it("answers a cross-origin OPTIONS with the CORS middleware's preflight, on any path, before any key", async () => {
    for (const path of ['/v1/chat/completions', '/api/user/self', '/nowhere']) {
      const res = await fetch(`${relay.url}${path}`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
      expect(res.status).toBe(204);
      expect(Object.fromEntries([...res.headers].filter(([k]) => k.startsWith('access-control-')))).toEqual({
        'access-control-allow-credentials': 'true',
        'access-control-allow-headers': '*',
        'access-control-allow-methods': 'GET,POST,PUT,DELETE,OPTIONS',
        'access-control-allow-origin': '*',
        'access-control-max-age': '43200',
      });
      expect(await res.text()).toBe('');
    }
  });

  it('answers an OPTIONS without an Origin like any unrouted call: 404 under /v1 and /api, the console page elsewhere', async () => {
    expect((await fetch(`${relay.url}/v1/chat/completions`, { method: 'OPTIONS' })).status).toBe(404);
    expect((await fetch(`${relay.url}/pg/chat/completions`, { method: 'OPTIONS' })).status).toBe(200);
  });

  it('adds the CORS headers to ordinary cross-origin answers, except on the dashboard /api/* routes and a same-host Origin', async () => {
    const cors = async (path: string, origin: string): Promise<string | null> =>
      (await fetch(`${relay.url}${path}`, { headers: { origin } })).headers.get('access-control-allow-origin');
    expect(await cors('/v1/models', 'https://app.example')).toBe('*');
    expect(await cors('/api/log/token', 'https://app.example')).toBe('*');
    expect(await cors('/api/user/self', 'https://app.example')).toBeNull();
    expect(await cors('/v1/models', relay.url)).toBeNull();
  });
});

describe('the stand-in checking tokens as new-api does (option tokens)', () => {
  it("answers new-api's 401 to a token it does not know, on the routes TokenAuth guards; the token looked up loses sk- and any -<channel>", async () => {
    const known = 'abcDEF0123456789';
    const asked: string[] = [];
    const checking = await startRelayStandin({ quiet: true, tokens: (t) => (asked.push(t), t === known) });
    try {
      const get = (path: string, authorization: string) => fetch(`${checking.url}${path}`, { headers: { authorization } });
      for (const key of [`sk-${known}`, known]) expect((await get('/v1/models', `Bearer ${key}`)).status).toBe(200);
      // A valid token asking for a channel passes the token check, then meets the channel rule (not an administrator's).
      expect((await get('/v1/models', `Bearer sk-${known}-2`)).status).toBe(403);
      const refused = await get('/v1/models', 'Bearer sk-unknownToken');
      expect(refused.status).toBe(401);
      const body = (await refused.json()) as { error: { code: string; message: string; type: string } };
      expect(body.error).toMatchObject({ code: '', type: 'new_api_error' });
      expect(body.error.message).toMatch(/^无效的令牌 \(request id: \S+\)$/);
      expect(asked).toEqual([known, known, known, 'unknownToken']);
      // The usage query is guarded too; the dashboard's other routes and preflights are not.
      expect((await get('/api/usage/token/', 'Bearer sk-unknownToken')).status).toBe(401);
      const preflight = await fetch(`${checking.url}/v1/models`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' } });
      expect(preflight.status).toBe(204);
    } finally {
      await checking.close();
    }
  });
});
