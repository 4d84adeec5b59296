import { zstdCompressSync } from '../../test/support/zstd.js';
import { brotliCompressSync, deflateSync, gzipSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { modelPrepass, requestedModel } from './index.js';

const MB = 1024 * 1024;

async function modelOf(contentType: string, body: string | Buffer, extra: Record<string, string> = {}): Promise<unknown> {
  return requestedModel('POST', '/v1/audio/transcriptions', { 'content-type': contentType, ...extra }, Buffer.from(body), MB);
}

function multipart(boundary: string, nl: string, parts: Array<{ name: string; value: string; filename?: string }>): string {
  let s = '';
  for (const p of parts) {
    s += `--${boundary}${nl}Content-Disposition: form-data; name="${p.name}"${p.filename ? `; filename="${p.filename}"` : ''}${nl}${nl}${p.value}${nl}`;
  }
  return s + `--${boundary}--${nl}`;
}

describe('requestedModel: form bodies (the relay reads them too)', () => {
  it('reads the model of a multipart body whatever the case of its boundary (browsers mix cases)', async () => {
    const b = '----WebKitFormBoundaryAbC123xYz';
    const body = multipart(b, '\r\n', [
      { name: 'file', value: 'RIFF....', filename: 'a.wav' },
      { name: 'model', value: 'vend-flash-free' },
    ]);
    expect(await modelOf(`multipart/form-data; boundary=${b}`, body)).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await modelOf(`multipart/form-data; Boundary="${b}"`, body)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('refuses a multipart type the relay does not recognise because of its letter case (it reads no model from it)', async () => {
    const body = multipart('b1', '\r\n', [{ name: 'model', value: 'vend-flash-free' }]);
    expect(await modelOf('Multipart/Form-Data; boundary=b1', body)).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('reads LF-only multipart bodies, as Go does', async () => {
    const body = multipart('XyZ', '\n', [
      { name: 'model', value: 'vend-flash-free' },
      { name: 'language', value: 'en' },
    ]);
    expect(await modelOf('multipart/form-data; boundary=XyZ', body)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('never takes a file part named model for the model', async () => {
    const body = multipart('b0', '\r\n', [
      { name: 'model', value: 'ignored.bin', filename: 'model' },
      { name: 'model', value: 'the-one' },
    ]);
    expect(await modelOf('multipart/form-data; boundary=b0', body)).toEqual({ ok: true, model: 'the-one' });
  });

  // new-api turns a repeated form field into an array, which its model struct cannot take: it answers 400.
  it('refuses a repeated model field, multipart or urlencoded, as the relay does', async () => {
    const body = multipart('b0', '\r\n', [
      { name: 'model', value: 'first' },
      { name: 'model', value: 'second' },
    ]);
    expect(await modelOf('multipart/form-data; boundary=b0', body)).toMatchObject({ ok: false, problem: 'invalid' });
    expect(await modelOf('application/x-www-form-urlencoded', 'model=vend-flash-free&model=x')).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('reads urlencoded forms', async () => {
    expect(await modelOf('application/x-www-form-urlencoded', 'model=vend-flash-free&language=en')).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('reads a compressed JSON body once decoded', async () => {
    const gz = gzipSync(JSON.stringify({ model: 'vend-flash-free' }));
    expect(await modelOf('application/json', gz, { 'content-encoding': 'gzip' })).toEqual({ ok: true, model: 'vend-flash-free' });
  });
});

describe('requestedModel: a body is decoded exactly where the relay decodes it', () => {
  const json = Buffer.from(JSON.stringify({ model: 'vend-flash-free', messages: [] }));
  const read = (encoding: string, body: Buffer, method = 'POST') =>
    requestedModel(method, '/v1/chat/completions', { 'content-type': 'application/json', 'content-encoding': encoding }, body, MB);

  // The relay leaves each of these as sent and reads the JSON in it.
  it.each(['identity', 'deflate', 'x-gzip', 'GZIP', 'identity, gzip', 'x-identity', 'compress', ''])('reads a %j body as sent', async (encoding) => {
    expect(await read(encoding, json)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('reads compressed bytes under a coding the relay does not undo as the relay does: no model in them (the relay refuses them)', async () => {
    expect(await read('deflate', deflateSync(json))).toEqual({ ok: true, model: null });
    expect(await read('GZIP', gzipSync(json))).toEqual({ ok: true, model: null });
  });

  it('reads the JSON a raw-deflate block hides, not what it inflates to (a free call passed as paid)', async () => {
    // Bytes that are a JSON object naming the free model, and a final stored deflate block: `\t`
    // opens it, `{"` is its length (0x227b), `\x84\xdd` that length's complement, then `1` and
    // spaces: inflated, the JSON number 1, no model.
    const len = 0x227b;
    const head = Buffer.from([0x09, 0x7b, 0x22, 0x84, 0xdd]);
    const block = Buffer.concat([Buffer.from('1'), Buffer.alloc(len - 1, 0x20)]);
    const body = Buffer.concat([head, block, Buffer.from('":0,"model":"vend-flash-free","messages":[]}')]);
    expect(inflateRawSync(body).toString().trim()).toBe('1');
    expect(await read('deflate', body)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('decodes gzip, br and zstd (where Node has a decoder; without one, 415)', async () => {
    expect(await read('gzip', gzipSync(json))).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await read('br', brotliCompressSync(json))).toEqual({ ok: true, model: 'vend-flash-free' });
    if (zstdCompressSync) expect(await read('zstd', zstdCompressSync(json))).toEqual({ ok: true, model: 'vend-flash-free' });
    else expect(await read('zstd', json)).toMatchObject({ ok: false, problem: 'unsupported_encoding' });
  });

  it('reads a large body while it arrives unless the relay decodes it first', () => {
    const large = { 'content-type': 'application/json', 'content-length': String(4 * MB) };
    expect(modelPrepass('POST', '/v1/chat/completions', { ...large, 'content-encoding': 'identity' })).not.toBeNull();
    expect(modelPrepass('POST', '/v1/chat/completions', { ...large, 'content-encoding': 'deflate' })).not.toBeNull();
    expect(modelPrepass('POST', '/v1/chat/completions', large)).not.toBeNull();
    expect(modelPrepass('POST', '/v1/chat/completions', { ...large, 'content-encoding': 'gzip' })).toBeNull();
  });
});

describe('requestedModel: every route where the relay reads a model', () => {
  const JSON_CT = { 'content-type': 'application/json' };
  const free = Buffer.from('{"model":"vend-flash-free"}');
  const at = (method: string, path: string, headers: Record<string, string>, body: Buffer | string | null, query = '') =>
    requestedModel(method, path, headers, body === null ? null : Buffer.from(body), MB, undefined, undefined, undefined, query);

  it.each([
    // text, by the API that shapes it
    '/v1/chat/completions',
    '/pg/chat/completions',
    '/v1/completions',
    '/v1/edits',
    '/v1/responses',
    '/v1/responses/compact',
    '/v1/messages',
    '/v1/alpha/search',
    // vectors and scores
    '/v1/embeddings',
    '/v1/engines/text-embedding-3-small/embeddings',
    '/v1/rerank',
    '/v1/moderations',
    // media
    '/v1/images/generations',
    '/v1/images/edits',
    '/v1/audio/speech',
    '/v1/audio/transcriptions',
    '/v1/audio/translations',
    '/v1/videos',
    '/v1/video/generations',
    '/kling/v1/videos/text2video',
  ])('POST %s with a JSON body names its model', async (path) => {
    expect(await at('POST', path, JSON_CT, free)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it.each(['/v1/some/future/route', '/v1/messages/count_tokens', '/v1/chat/completions/'])('POST %s, no route of the relay, names no model (its 404 reads none)', async (path) => {
    expect(await at('POST', path, JSON_CT, free)).toEqual({ ok: true, model: null });
  });

  it('the playground reads a multipart body too (issue #17: /pg was forwarded uncounted)', async () => {
    const body = multipart('pg', '\r\n', [{ name: 'model', value: 'vend-flash-free' }]);
    expect(await at('POST', '/pg/chat/completions', { 'content-type': 'multipart/form-data; boundary=pg' }, body)).toEqual({ ok: true, model: 'vend-flash-free' });
    // A chat call does not: the relay's generic read skips multipart, reads no model, and answers 400.
    expect(await at('POST', '/v1/chat/completions', { 'content-type': 'multipart/form-data; boundary=pg' }, body)).toEqual({ ok: true, model: null });
  });

  it('video tasks read multipart, the OpenAI SDK way', async () => {
    const body = multipart('v', '\r\n', [
      { name: 'prompt', value: 'a cat' },
      { name: 'model', value: 'sora-2-free' },
    ]);
    expect(await at('POST', '/v1/videos', { 'content-type': 'multipart/form-data; boundary=v' }, body)).toEqual({ ok: true, model: 'sora-2-free' });
  });

  it('falls back on the model the relay uses when none is named', async () => {
    expect(await at('POST', '/v1/images/generations', JSON_CT, '{"prompt":"x"}')).toEqual({ ok: true, model: 'dall-e' });
    expect(
      await at(
        'POST',
        '/v1/audio/transcriptions',
        { 'content-type': 'multipart/form-data; boundary=b' },
        multipart('b', '\r\n', [{ name: 'file', value: 'x', filename: 'a.wav' }]),
      ),
    ).toEqual({
      ok: true,
      model: 'whisper-1',
    });
    expect(await at('POST', '/v1/engines/vend-flash-free/embeddings', JSON_CT, '{"input":"x"}')).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('/v1/engines/{model}/embeddings: the body model wins over the path, as in the relay', async () => {
    expect(await at('POST', '/v1/engines/gpt-4o/embeddings', JSON_CT, free)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('image edits read a multipart body only under an exact multipart Content-Type', async () => {
    const body = multipart('e', '\r\n', [{ name: 'model', value: 'vend-flash-free' }]);
    expect(await at('POST', '/v1/images/edits', { 'content-type': 'multipart/form-data; boundary=e' }, body)).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await at('POST', '/v1/images/edits', { 'content-type': 'text/x; a=multipart/form-data; boundary=e' }, body)).toEqual({ ok: true, model: null });
  });

  it('realtime reads ?model= on its GET', async () => {
    expect(await at('GET', '/v1/realtime', {}, null, 'model=vend-flash-free')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await at('GET', '/v1/realtime', {}, null, 'model=gpt-4o-realtime&model=vend-flash-free')).toEqual({ ok: true, model: 'gpt-4o-realtime' });
    expect(await at('GET', '/v1/realtime', {}, null)).toEqual({ ok: true, model: null });
  });

  it('Gemini paths: the model in the path, or the body when the path carries a task marker', async () => {
    expect(await at('POST', '/v1beta/models/vend-flash-free:generateContent', JSON_CT, '{"model":"gpt-4o"}')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await at('POST', '/v1beta/models/gemini-pro/v1/videos', JSON_CT, free)).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await at('GET', '/v1beta/models/vend-flash-free', {}, null)).toEqual({ ok: true, model: null });
  });

  it('reads nothing off the model routes', async () => {
    expect(await at('POST', '/api/user/login', JSON_CT, free)).toEqual({ ok: true, model: null });
    expect(await at('GET', '/v1/chat/completions', JSON_CT, free)).toEqual({ ok: true, model: null });
    expect(await at('POST', '/v1/videos/task_1/remix', JSON_CT, free)).toEqual({ ok: true, model: null });
  });

  it('issue #17 reproductions: counted or refused, never uncounted', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(await at('POST', '/v1/embeddings', form, '{"a":"&model=vend-flash-free&input=hi&","model":"gpt-4o"}')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(await at('POST', '/v1/embeddings', { 'content-type': 'text/plain; x=application/x-www-form-urlencoded' }, 'model=vend-flash-free&input=hi')).toEqual({
      ok: true,
      model: 'vend-flash-free',
    });
  });
});
