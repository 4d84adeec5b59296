import { describe, expect, it } from 'vitest';
import { multipartFields } from './multipart.js';

const all = { wanted: () => true };
const read = (body: string, boundary = 'b') => multipartFields(Buffer.from(body, 'latin1'), boundary, all);
const values = (body: string, boundary = 'b') => {
  const r = read(body, boundary);
  if (!r.ok) throw new Error(r.reason);
  return r.fields;
};

describe("multipartFields: Go's multipart reader (ReadForm)", () => {
  it('reads value parts and skips file parts and parts without a form-data name', () => {
    const body =
      '--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n' +
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nvend-flash-free\r\n' +
      '--b\r\nContent-Disposition: attachment; name="other"\r\n\r\nx\r\n' +
      '--b\r\nContent-Type: text/plain\r\n\r\nno disposition\r\n' +
      '--b--\r\n';
    expect(values(body)).toEqual([['model', 'vend-flash-free']]);
  });

  it('skips a preamble and ignores an epilogue', () => {
    expect(values('preamble\r\nmore\r\n--b\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n--b--\r\nepilogue')).toEqual([['model', 'm']]);
  });

  it('reads LF-only bodies when the first boundary line ends in LF', () => {
    expect(values('--b\nContent-Disposition: form-data; name="model"\n\nm\n--b--\n')).toEqual([['model', 'm']]);
  });

  it('takes `--bX` inside a value as data, and ends a value at `--b` followed by white space', () => {
    expect(values('--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--bX\r\n--b \t\r\nContent-Disposition: form-data; name="n"\r\n\r\n\r\n--b--')).toEqual([
      ['model', 'm\r\n--bX'],
      ['n', ''],
    ]);
  });

  it('reads an empty part that ends right at the boundary', () => {
    expect(values('--b\r\nContent-Disposition: form-data; name="model"\r\n\r\n--b--\r\n')).toEqual([['model', '']]);
  });

  it('reads header names in any case, the first Content-Disposition of a part', () => {
    expect(values('--b\r\ncontent-DISPOSITION: form-data; name="model"\r\nContent-Disposition: form-data; name="x"\r\n\r\nm\r\n--b--\r\n')).toEqual([['model', 'm']]);
  });

  it('reads RFC 2231 and unquoted names as Go does', () => {
    expect(values("--b\r\nContent-Disposition: form-data; name=input; name*=utf-8''model\r\n\r\nm\r\n--b--\r\n")).toEqual([['model', 'm']]);
  });

  it('fails where Go fails the whole form (new-api then answers 400)', () => {
    for (const body of [
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm', // no closing boundary
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--b', // no final boundary
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--b\r\nBroken header\r\n\r\nx\r\n--b--', // malformed header
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--b x\r\n', // boundary line with trailing text
      '--b\r\nContent-Disposition: form-data; name="model"\r\n', // header block not terminated
      'no boundary at all\r\n',
    ]) {
      expect(read(body)).toMatchObject({ ok: false });
    }
  });

  it('fails beyond 1000 parts, as Go does', () => {
    const part = '--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n';
    expect(read(part.repeat(1000) + '--b--\r\n')).toMatchObject({ ok: true });
    expect(read(part.repeat(1001) + '--b--\r\n')).toMatchObject({ ok: false });
  });

  it('refuses what it will not follow Go into: folded headers, a quoted-printable wanted field, an unparsable disposition that may name it', () => {
    expect(read('--b\r\nContent-Disposition: form-data;\r\n name="model"\r\n\r\nm\r\n--b--\r\n')).toMatchObject({ ok: false });
    const qp = '--b\r\nContent-Disposition: form-data; name="model"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nvend-flash-fre=65\r\n--b--\r\n';
    expect(read(qp)).toMatchObject({ ok: false });
    expect(multipartFields(Buffer.from(qp.replace('name="model"', 'name="input"')), 'b', { wanted: (n) => n === 'model' })).toMatchObject({ ok: true });
    expect(read('--b\r\nContent-Disposition: form-data; name="model"; name="x"\r\n\r\nm\r\n--b--\r\n')).toMatchObject({ ok: false });
    // Unparsable but naming nothing wanted: Go skips the part, and so does sluice.
    expect(multipartFields(Buffer.from('--b\r\nContent-Disposition: form-data; name="a"; name="b"\r\n\r\nm\r\n--b--\r\n'), 'b', { wanted: (n) => n === 'model' })).toEqual({
      ok: true,
      fields: [],
    });
  });

  it('returns the values of unwanted fields empty (they are not copied)', () => {
    const r = multipartFields(Buffer.from('--b\r\nContent-Disposition: form-data; name="input"\r\n\r\nlong text\r\n--b--\r\n'), 'b', { wanted: () => false });
    expect(r).toEqual({ ok: true, fields: [['input', '']] });
  });
});
