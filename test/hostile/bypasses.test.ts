/**
 * Free-tier bypasses of issue #17, replayed as an attacker would against a running sluice and the
 * relay stand-in (which reads models as new-api does): a call to a free model is counted or
 * refused, never admitted uncounted. What a user notices is asserted: the status, the body's
 * shape, whether the relay saw the call, the model it read, and the user's free-tier counter.
 */
import { zstdCompressSync } from '../support/zstd.js';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { startHarness, useHarness, type Harness } from '../support/harness.js';
import { freshUser, usedToday } from '../support/helpers.js';
import { request } from '../support/http.js';
import { answerJson, finalStatus, openRaw } from './raw.js';

const FREE = 'vend-flash-free';

/** sluice's own refusal: OpenAI-shaped, `invalid_request`, the request id at the end. */
function expectRefusal(r: { status: number; text: string }, reason: RegExp): void {
  expect(r.status).toBe(400);
  const body = JSON.parse(r.text) as { error: { code: string; message: string; type: string } };
  expect(Object.keys(body.error)).toEqual(['code', 'message', 'type']);
  expect(body.error).toMatchObject({ code: 'invalid_request', type: 'new_api_error' });
  expect(body.error.message).toMatch(reason);
  expect(body.error.message).toMatch(/\(request id: \w+\)$/);
}

function multipart(boundary: string, parts: Array<[name: string, value: string]>): string {
  return parts.map(([n, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${n}"\r\n\r\n${v}\r\n`).join('') + `--${boundary}--\r\n`;
}

describe('content-type confusion (issue #17, item 1): the model is read as the relay reads it for that Content-Type', () => {
  const h = useHarness({ store: 'memory' });

  it('refuses a form-declared body that is a JSON object naming another model (the issue reproduction), and forwards nothing', async () => {
    const { user, key } = await freshUser(h, 'ct1');
    const r = await request(h.url, 'POST', '/v1/embeddings', {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: '{"a":"&model=vend-flash-free&input=hi&","model":"gpt-4o"}',
    });
    expectRefusal(r, /declared a form but is a JSON object/);
    expect(h.relay.started).toBe(0);
    expect(await usedToday(h, user)).toBe(0);
  });

  it('counts a form read through a Content-Type that merely contains the form type (the second reproduction)', async () => {
    const { user, key } = await freshUser(h, 'ct2');
    const r = await request(h.url, 'POST', '/v1/embeddings', {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain; x=application/x-www-form-urlencoded' },
      body: 'model=vend-flash-free&input=hi',
    });
    expect(r.status).toBe(200);
    expect(h.relay.requests[0]!.model).toBe(FREE);
    expect(r.headers['ratelimit']).toBeDefined();
    expect(await usedToday(h, user)).toBe(1);
  });

  it('counts forms as Go reads them: a field spelt MODEL (struct fields match ignoring case), escapes, + and empty pairs', async () => {
    for (const [ct, body] of [
      ['application/x-www-form-urlencoded', 'MODEL=vend-flash-free&input=hi'],
      ['application/x-www-form-urlencoded', 'model=vend%2Dflash%2Dfre%65&input=hi'],
      ['application/x-www-form-urlencoded; charset=utf-8', '&&input=hi+there&model=vend-flash-free&'],
    ] as const) {
      const { user, key } = await freshUser(h, 'ct3');
      h.relay.reset();
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-type': ct }, body });
      expect({ body, status: r.status, relayRead: h.relay.requests[0]?.model, counted: await usedToday(h, user) }).toEqual({ body, status: 200, relayRead: FREE, counted: 1 });
    }
  });

  it('refuses a form the relay would read two ways or refuse (a repeated model, a ; separator), and forwards nothing', async () => {
    const { user, key } = await freshUser(h, 'ct4');
    for (const body of ['model=gpt-4o&model=vend-flash-free', 'model=gpt-4o&Model=vend-flash-free', 'input=hi;model=vend-flash-free']) {
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' }, body });
      expectRefusal(r, /form/);
    }
    expect(h.relay.started).toBe(0);
    expect(await usedToday(h, user)).toBe(0);
  });

  it('refuses a form or JSON Content-Type the relay misses only by letter case', async () => {
    const { key } = await freshUser(h, 'ct5');
    for (const [ct, body] of [
      ['Application/X-WWW-Form-Urlencoded', 'model=vend-flash-free'],
      ['APPLICATION/JSON', '{"model":"vend-flash-free"}'],
    ] as const) {
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-type': ct }, body });
      expectRefusal(r, /letter case/);
    }
    expect(h.relay.started).toBe(0);
  });

  it('counts exactly what the relay read, whatever the Content-Type (JSON, form, multipart, none)', async () => {
    const cases: Array<[path: string, ct: string | undefined, body: string]> = [
      ['/v1/chat/completions', 'application/json', '{"model":"vend-flash-free","messages":[]}'],
      ['/v1/chat/completions', 'application/json; charset=utf-8', '{"model":"vend-flash","messages":[]}'],
      ['/v1/chat/completions', 'text/plain', '{"model":"vend-flash-free"}'], // the relay reads no model: 400, nothing served
      ['/v1/chat/completions', undefined, '{"model":"vend-flash-free"}'],
      ['/v1/chat/completions', 'application/json; x=multipart/form-data', '{"model":"vend-flash-free"}'], // the generic read skips it
      ['/v1/responses', 'application/x-www-form-urlencoded', 'model=vend-flash-free&input=hi'],
      [
        '/v1/videos',
        'multipart/form-data; boundary=XyZ',
        multipart('XyZ', [
          ['prompt', 'a cat'],
          ['model', FREE],
        ]),
      ],
      ['/pg/chat/completions', 'multipart/form-data; boundary=q', multipart('q', [['model', FREE]])],
      ['/pg/chat/completions', 'multipart/form-data', '{"model":"vend-flash-free"}'], // no boundary: new-api reads it as JSON
      ['/v1/audio/transcriptions', 'multipart/form-data; boundary=a', multipart('a', [['model', FREE]])],
    ];
    for (const [path, ct, body] of cases) {
      const { user, key } = await freshUser(h, 'ct6');
      h.relay.reset();
      const headers: Record<string, string | undefined> = { authorization: `Bearer ${key}`, 'content-type': ct };
      const r = await request(h.url, 'POST', path, { headers, body });
      const seen = h.relay.requests[0];
      const relayRead = seen?.model;
      const counted = await usedToday(h, user);
      expect({ path, ct, counted, free: relayRead === FREE, status: r.status }).toEqual({
        path,
        ct,
        counted: relayRead === FREE ? 1 : 0,
        free: relayRead === FREE,
        status: seen?.modelError !== undefined ? 400 : 200,
      });
    }
  });
});

describe('content codings: a body is decoded exactly where the relay decodes it (new-api: exactly gzip, br or zstd)', () => {
  const h = useHarness({ store: 'memory' });
  const json = Buffer.from('{"model":"vend-flash-free","messages":[]}');

  /**
   * A body that is a JSON object naming the free model as sent, and a final stored deflate block
   * as inflated: `\t` opens the block, `{"` is its length (0x227b), the next two bytes its
   * complement, then `1` and spaces: inflated, the JSON number 1, which names no model.
   */
  function jsonThatInflatesToNothing(): Buffer {
    const len = 0x227b;
    return Buffer.concat([Buffer.from([0x09, 0x7b, 0x22, 0x84, 0xdd]), Buffer.from('1'), Buffer.alloc(len - 1, 0x20), Buffer.from('":0,"model":"vend-flash-free","messages":[]}')]);
  }

  it.each([
    ['deflate', jsonThatInflatesToNothing()],
    ['DEFLATE', jsonThatInflatesToNothing()],
    ['identity, deflate', jsonThatInflatesToNothing()],
    ['deflate', deflateSync(json)],
    ['x-gzip', json],
    ['x-gzip', gzipSync(json)],
    ['GZIP', gzipSync(json)],
    ['gzip, identity', json],
    ['gzip', gzipSync(json)],
    ['br', brotliCompressSync(json)],
  ] as const)('Content-Encoding %j: counted exactly when the relay read the free model', async (encoding, body) => {
    const { user, key } = await freshUser(h, 'ce');
    h.relay.reset();
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-encoding': encoding }, body });
    const seen = h.relay.requests[0];
    expect(seen, 'forwarded').toBeDefined();
    const free = seen!.model === FREE;
    expect({ status: r.status, counted: await usedToday(h, user), rateLimit: r.headers.ratelimit !== undefined }).toEqual({
      status: seen!.modelError !== undefined ? 400 : 200,
      counted: free ? 1 : 0,
      rateLimit: free,
    });
  });

  it.runIf(zstdCompressSync !== undefined)('Content-Encoding zstd (Codex CLI sends it): decoded as the relay decodes it, and counted', async () => {
    const { user, key } = await freshUser(h, 'ce-zstd');
    h.relay.reset();
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-encoding': 'zstd' }, body: zstdCompressSync!(json) });
    expect(r.status).toBe(200);
    expect(h.relay.requests[0]?.model).toBe(FREE);
    expect(r.headers.ratelimit).toBeDefined();
    expect(await usedToday(h, user)).toBe(1);
  });
  it.runIf(zstdCompressSync === undefined)('Content-Encoding zstd on a Node without a zstd decoder (Node 20): 415, nothing forwarded', async () => {
    const { key } = await freshUser(h, 'ce-zstd');
    h.relay.reset();
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}`, 'content-encoding': 'zstd' }, body: json });
    expect(r.status).toBe(415);
    expect(h.relay.started).toBe(0);
  });

  it('the raw-deflate disguise is read as the relay reads it: a free call, counted, and refused once the minute is spent', async () => {
    const { user, key } = await freshUser(h, 'ce-spent');
    const headers = { authorization: `Bearer ${key}`, 'content-encoding': 'deflate' };
    for (let i = 0; i < 20; i++) expect((await request(h.url, 'POST', '/v1/chat/completions', { headers, body: jsonThatInflatesToNothing() })).status).toBe(200);
    h.relay.reset();
    const r = await request(h.url, 'POST', '/v1/chat/completions', { headers, body: jsonThatInflatesToNothing() });
    expect(r.status).toBe(429);
    expect(h.relay.started).toBe(0);
    expect(await usedToday(h, user)).toBe(20);
  });

  it.each([
    ['a JSON body', json],
    ['a gzip body', gzipSync(json)],
  ])('Content-Encoding gzip on two lines, %s: the relay gets one joined line, and both read the body as sent', async (_label, body) => {
    const { user, key } = await freshUser(h, 'ce-twice');
    h.relay.reset();
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\ncontent-encoding: gzip\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const c = await openRaw(Number(new URL(h.url).port), Buffer.concat([Buffer.from(head), body]));
    const text = await c.waitFor(/\r\n\r\n\{.*\}$/s, 3_000);
    c.destroy();
    const seen = h.relay.requests[0];
    expect(seen?.headers['content-encoding']).toBe('gzip, gzip');
    const free = seen?.model === FREE;
    expect(free).toBe(body === json);
    expect({ status: finalStatus(text), counted: await usedToday(h, user) }).toEqual({ status: free ? 200 : 400, counted: free ? 1 : 0 });
  });
});

describe("a free model's compact variant (new-api routes /v1/responses/compact on <model>-openai-compact)", () => {
  const h = useHarness({ store: 'memory' });

  it.each([
    ['/v1/responses/compact', FREE],
    ['/v1/responses/compact', `${FREE}-openai-compact`],
    ['/v1/responses', `${FREE}-openai-compact`],
  ])('%s naming %s reaches the compact variant of the free model, and is counted', async (path, model) => {
    const { user, key } = await freshUser(h, 'compact');
    h.relay.reset();
    const r = await request(h.url, 'POST', path, { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model, input: 'hi' }) });
    expect(r.status).toBe(200);
    expect(h.relay.requests[0]?.model).toBe(`${FREE}-openai-compact`);
    expect(await usedToday(h, user)).toBe(1);
  });

  it('a paid model on the same route is not counted', async () => {
    const { user, key } = await freshUser(h, 'compact-paid');
    h.relay.reset();
    const r = await request(h.url, 'POST', '/v1/responses/compact', {
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'vend-flash-openai-compact', input: 'hi' }),
    });
    expect(r.status).toBe(200);
    expect(h.relay.requests[0]?.model).toBe('vend-flash-openai-compact');
    expect(await usedToday(h, user)).toBe(0);
  });
});

/**
 * An administrator's `sk-<key>-<n>` pins the call to channel n, and new-api then serves whatever
 * model it names from that channel: a paid model's name reaches the free models' upstream.
 */
describe('a call pinned to a channel (sk-<key>-<n>): counted as free, whatever model it names', () => {
  // A key the relay knows as an administrator's (it grants the channel), imported into sluice's registry.
  const ADMIN = `AdminPinned${randomBytes(16).toString('hex')}`;
  const ADMIN2 = `AdminPinned${randomBytes(16).toString('hex')}`;
  let relay: RelayStandin;
  let all: Harness;
  let listed: Harness;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true, adminKeys: [ADMIN, ADMIN2] });
    all = await startHarness({ store: 'memory', relay });
    listed = await startHarness({ store: 'memory', relay, file: { freeTier: { pinnedChannels: [5] } } });
  });
  afterAll(async () => {
    await Promise.all([all?.close(), listed?.close()]);
    await relay?.close();
  });
  afterEach(() => relay.reset());

  const chat = (h: Harness, key: string) =>
    request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash', messages: [] }) });

  it('by default every pinned call counts: the 21st in a minute is refused, and nothing reaches the channel', async () => {
    const user = `pinned-${process.pid}`;
    await all.createKey(user, { key: `sk-${ADMIN}` });
    for (let i = 0; i < 20; i++) expect((await chat(all, `sk-${ADMIN}-7`)).status).toBe(200);
    expect(relay.requests.map((r) => [r.channel, r.model])).toEqual(new Array(20).fill(['7', 'vend-flash']));
    expect(await usedToday(all, user)).toBe(20);
    const refused = await chat(all, `sk-${ADMIN}-7`);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text).error.code).toBe('free_tier_rate_limited');
    expect(relay.started).toBe(20);
    // Not pinned, the paid model is not limited.
    expect((await chat(all, `sk-${ADMIN}`)).status).toBe(200);
    expect(await usedToday(all, user)).toBe(20);
  });

  it('a pinned key on a route where the relay picks no channel (the model list, usage) is not counted', async () => {
    const user = `pinned-models-${process.pid}`;
    await all.createKey(user, { key: `sk-${ADMIN2}` });
    for (let i = 0; i < 25; i++) {
      const r = await request(all.url, 'GET', '/v1/models', { headers: { authorization: `Bearer sk-${ADMIN2}-7` } });
      expect(r.status).toBe(200);
    }
    expect(await usedToday(all, user)).toBe(0);
  });

  it('with pinnedChannels listed, only a channel the relay reads as a listed id counts (strconv.Atoi: +05 is 5)', async () => {
    const user = `pinned-listed-${process.pid}`;
    await listed.createKey(user, { key: `sk-${ADMIN}` });
    expect((await chat(listed, `sk-${ADMIN}-7`)).status).toBe(200);
    expect(await usedToday(listed, user)).toBe(0);
    expect((await chat(listed, `sk-${ADMIN}-+05`)).status).toBe(200);
    expect(relay.requests.map((r) => r.channel)).toEqual(['7', '+05']);
    expect(await usedToday(listed, user)).toBe(1);
  });
});

describe('model routes outside /v1 and /v1beta (issue #17, item 2): every route where the relay reads a model counts', () => {
  const h = useHarness({ store: 'memory' });

  // status: the relay's answer (200 unless said).
  const routes: Array<[label: string, method: string, path: string, ct: string | undefined, body: string | undefined, model: string, status?: number]> = [
    ['the playground', 'POST', '/pg/chat/completions', 'application/json', '{"model":"vend-flash-free","messages":[]}', FREE],
    [
      'legacy engine embeddings (the body wins over the path)',
      'POST',
      '/v1/engines/text-embedding-3-small/embeddings',
      'application/json',
      '{"model":"vend-flash-free","input":"x"}',
      FREE,
    ],
    // Asked with no switch, its handler's upgrader answers 400, after the distributor read the model.
    ['realtime (?model=), as an ordinary GET', 'GET', '/v1/realtime?model=vend-flash-free', undefined, undefined, FREE, 400],
    ['a Gemini path the distributor reads as a video task', 'POST', '/v1beta/models/gemini-pro/v1/videos', 'application/json', '{"model":"vend-flash-free"}', FREE],
    [
      'video generations, multipart with an unquoted field name (Go reads it)',
      'POST',
      '/v1/video/generations',
      'multipart/form-data; boundary=vg',
      '--vg\r\nContent-Disposition: form-data; name=model\r\n\r\nvend-flash-free\r\n--vg--\r\n',
      FREE,
    ],
    ['Kling', 'POST', '/kling/v1/videos/text2video', 'application/json', '{"model":"kling-free","prompt":"x"}', 'kling-free'],
    ['Jimeng', 'POST', '/jimeng/?Action=CVSync2AsyncSubmitTask&Version=2022-08-31', 'application/json', '{"req_key":"jimeng-free","model":"jimeng-free"}', 'jimeng-free'],
    ['Suno (suno_ and the action)', 'POST', '/suno/submit/song-free', 'application/json', '{"prompt":"x"}', 'suno_song-free'],
    ['Midjourney change (mj_ and the body action)', 'POST', '/mj/submit/change', 'application/json', '{"action":"VARY-FREE","taskId":"1"}', 'mj_vary-free'],
    ['Midjourney under a mode prefix', 'POST', '/relax/mj/submit/simple-change', 'application/json', '{"action":"x-free"}', 'mj_x-free'],
  ];

  it.each(routes)('%s: %s %s', async (_label, method, path, ct, body, model, status = 200) => {
    const { user, key } = await freshUser(h, 'rt');
    const headers: Record<string, string | undefined> = { authorization: `Bearer ${key}`, 'content-type': ct };
    const r = await request(h.url, method, path, body === undefined ? { headers } : { headers, body });
    expect(r.status).toBe(status);
    expect(h.relay.requests[0]!.model).toBe(model);
    expect(r.headers['ratelimit-policy']).toBeDefined();
    expect(await usedToday(h, user)).toBe(1);
  });

  it('the playground refuses once the free tier is spent, like /v1/chat/completions', async () => {
    const { key } = await freshUser(h, 'pg');
    const call = () => request(h.url, 'POST', '/pg/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: '{"model":"vend-flash-free","messages":[]}' });
    for (let i = 0; i < 20; i++) expect((await call()).status).toBe(200);
    const refused = await call();
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { code: 'free_tier_rate_limited' } });
    expect(h.relay.requests).toHaveLength(20);
  });
});

describe('dot segments (issue #17, item 3): refused, never matched as one path and forwarded as another', () => {
  const h = useHarness({ store: 'memory', file: { ipLimits: [{ name: 'usage-query', paths: ['/api/log/token'], limit: 1, windowSeconds: 1200 }] } });

  it.each([
    ['GET', '/x/../api/log/token'],
    ['GET', '/api/log/./token'],
    ['GET', '/x/%2e%2e/api/log/token'],
    ['GET', '/x/.%2E/api/log/token'],
    ['GET', '/api/log/%2E/token'],
    ['GET', '/x/%2e%2e%2fapi/log/token'],
    ['GET', '/x/..;/api/log/token'],
    ['GET', '/x/%5C..%5Capi/log/token'],
    ['POST', '/x/../v1/chat/completions'],
    ['POST', '/v1/x/%2E%2E/chat/completions'],
  ])('%s %s: 400 in the JSON shape, nothing forwarded, no counter moved', async (method, path) => {
    const { user, key } = await freshUser(h, 'dot');
    const body = method === 'POST' ? '{"model":"vend-flash-free","messages":[]}' : '';
    const head = `${method} ${path} HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${key}\r\n${body ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` : ''}\r\n`;
    // fetch and URL parsers would resolve the dot segments before sending: the bytes go out as written.
    const c = await openRaw(Number(new URL(h.url).port), head + body);
    const text = await c.waitFor(/\r\n\r\n\{.*\}$/s, 3_000); // sluice closes the connection after this 400
    c.destroy();
    expect(finalStatus(text)).toBe(400);
    const err = answerJson(text);
    expect(err.error.code).toBe('invalid_request');
    expect(err.error.message).toMatch(/'\.' or '\.\.' segment/);
    expect(h.relay.started).toBe(0);
    expect(await usedToday(h, user)).toBe(0);
  });

  it('leaves the per-IP budget of the path they would reach to the calls that really reach it', async () => {
    const { key } = await freshUser(h, 'dot2');
    const status = async (path: string): Promise<number> => {
      const c = await openRaw(Number(new URL(h.url).port), `GET ${path} HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${key}\r\nX-Forwarded-For: 198.51.100.77\r\n\r\n`);
      const text = await c.waitFor(/HTTP\/1\.1 \d{3}/, 3_000);
      c.destroy();
      return finalStatus(text);
    };
    expect(await status('/x/../api/log/token')).toBe(400);
    expect(await status('/api/log/token')).toBe(200);
    expect(await status('/api/log/token')).toBe(429);
  });
});

describe('the relay routes on the path sluice judged: nothing between them rewrites it', () => {
  const h = useHarness({ store: 'memory', file: { ipLimits: [{ name: 'usage-query', paths: ['/api/log/token'], limit: 1, windowSeconds: 1200 }] } });
  const port = (): number => Number(new URL(h.url).port);
  const send = async (method: string, path: string, key: string, body = ''): Promise<number> => {
    const head = `${method} ${path} HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${key}\r\nX-Forwarded-For: 198.51.100.78\r\n${body ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` : ''}Connection: close\r\n\r\n`;
    const c = await openRaw(port(), head + body);
    const text = await c.waitFor(/HTTP\/1\.1 \d{3}[\s\S]*\r\n\r\n/, 3_000);
    c.destroy();
    return finalStatus(text);
  };

  it('forwards backslashes as sent (http-proxy once turned them into slashes: free calls went uncounted)', async () => {
    const { user, key } = await freshUser(h, 'backslash');
    const body = `{"model":"${FREE}","messages":[]}`;
    // The relay stand-in, like new-api's router, finds no route there: a 404 it answers itself, never a counted-free call it serves.
    expect(await send('POST', '/v1\\chat\\completions', key, body)).toBe(404);
    expect(h.relay.requests.map((r) => r.url)).toEqual(['/v1\\chat\\completions']);
    expect(h.relay.requests[0]!.model).toBeUndefined();
    expect(await usedToday(h, user)).toBe(0);
    // The per-IP rule's path spelt with backslashes is not the rule's path at the relay either.
    await send('GET', '/api\\log\\token', key);
    expect(h.relay.requests.at(-1)!.url).toBe('/api\\log\\token');
    expect(await send('GET', '/api/log/token', key)).toBe(200);
    expect(await send('GET', '/api/log/token', key)).toBe(429);
  });

  it('counts a Gemini call whose path holds a task marker only once a %2F slash is collapsed (`.../v1/%2Fvideos`): the relay reads the model from that path', async () => {
    const { user, key } = await freshUser(h, 'slash-marker');
    const body = '{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}';
    for (const path of [`/v1beta/models/${FREE}:generateContent/v1/%2Fvideos`, `/v1/models/${FREE}:generateContent/v1/%2Fvideo/generations`]) {
      await send('POST', path, key, body);
    }
    // Before, sluice judged a video task (a body naming no model) and counted neither.
    expect(await usedToday(h, user)).toBe(2);
    expect(h.relay.requests.map((r) => r.url)).toEqual([`/v1beta/models/${FREE}:generateContent/v1/%2Fvideos`, `/v1/models/${FREE}:generateContent/v1/%2Fvideo/generations`]);
  });

  it('forwards a `#` in the path as sent (url.parse once dropped it and what follows)', async () => {
    const { key } = await freshUser(h, 'hash');
    const body = `{"model":"${FREE}","messages":[]}`;
    await send('POST', '/v1/chat/completions#x', key, body);
    await send('POST', `/v1beta/models/${FREE}#:generateContent`, key, body);
    // Go keeps a '#' in the request target as part of the path: the relay routes none of these.
    expect(h.relay.requests.map((r) => r.url)).toEqual(['/v1/chat/completions#x', `/v1beta/models/${FREE}#:generateContent`]);
  });

  it('forwards `http:/` in a path as judged (http-proxy rewrites it to `http://`)', async () => {
    const { key } = await freshUser(h, 'scheme');
    await send('GET', '/v1/models/http:/x', key);
    await send('GET', '/v1/models/https://y', key);
    // Percent-encoded colons: the relay decodes them back to the paths sluice judged (slashes collapsed).
    expect(h.relay.requests.map((r) => r.url)).toEqual(['/v1/models/http%3A/x', '/v1/models/https%3A/y']);
  });
});
