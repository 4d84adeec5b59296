import { gzipSync } from 'node:zlib';
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
    const body = multipart(b, '\r\n', [{ name: 'file', value: 'RIFF....', filename: 'a.wav' }, { name: 'model', value: 'vend-flash-free' }]);
    expect(await modelOf(`multipart/form-data; boundary=${b}`, body)).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(await modelOf(`multipart/form-data; Boundary="${b}"`, body)).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('refuses a multipart type the relay does not recognise because of its letter case (it reads no model from it)', async () => {
    const body = multipart('b1', '\r\n', [{ name: 'model', value: 'vend-flash-free' }]);
    expect(await modelOf('Multipart/Form-Data; boundary=b1', body)).toMatchObject({ ok: false, status: 400 });
  });

  it('reads LF-only multipart bodies, as Go does', async () => {
    const body = multipart('XyZ', '\n', [{ name: 'model', value: 'vend-flash-free' }, { name: 'language', value: 'en' }]);
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
    expect(await modelOf('multipart/form-data; boundary=b0', body)).toMatchObject({ ok: false, status: 400 });
    expect(await modelOf('application/x-www-form-urlencoded', 'model=vend-flash-free&model=x')).toMatchObject({ ok: false, status: 400 });
  });

  it('reads urlencoded forms', async () => {
    expect(await modelOf('application/x-www-form-urlencoded', 'model=vend-flash-free&language=en')).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('reads a compressed JSON body once decoded', async () => {
    const gz = gzipSync(JSON.stringify({ model: 'vend-flash-free' }));
    expect(await modelOf('application/json', gz, { 'content-encoding': 'gzip' })).toEqual({ ok: true, model: 'vend-flash-free' });
  });
});

describe('requestedModel: Content-Encoding identity is no compression', () => {
  const json = Buffer.from(JSON.stringify({ model: 'vend-flash-free', messages: [] }));

  it.each(['identity', ' Identity ', 'identity, identity', ''])('reads a %j body at once, without the decoding detour', (encoding) => {
    const r = requestedModel('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-encoding': encoding }, json, MB);
    expect(r).not.toBeInstanceOf(Promise);
    expect(r).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it.each(['identity identity', 'identityidentity', 'x-identity'])('refuses %j as an unknown coding (415), as any other', async (encoding) => {
    const r = requestedModel('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-encoding': encoding }, json, MB);
    expect(await r).toMatchObject({ ok: false, status: 415 });
  });

  it('still decodes a body that names a real coding beside identity', async () => {
    const r = requestedModel('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-encoding': 'identity, gzip' }, gzipSync(json), MB);
    expect(r).toBeInstanceOf(Promise);
    expect(await r).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('reads a large identity body while it arrives, as an unencoded one; a gzip body only after decoding', () => {
    const large = { 'content-type': 'application/json', 'content-length': String(4 * MB) };
    expect(modelPrepass('POST', '/v1/chat/completions', { ...large, 'content-encoding': 'identity' })).not.toBeNull();
    expect(modelPrepass('POST', '/v1/chat/completions', large)).not.toBeNull();
    expect(modelPrepass('POST', '/v1/chat/completions', { ...large, 'content-encoding': 'gzip' })).toBeNull();
  });
});
