import { describe, expect, it } from 'vitest';
import { bodyKind, modelByContentType } from './content-type.js';

const read = (ct: string, body: string, multipart = true) => modelByContentType(ct, Buffer.from(body, 'latin1'), undefined, multipart);

describe('bodyKind: how new-api picks a reader (common/gin.go), case-sensitively', () => {
  it.each([
    ['application/json', 'json'],
    ['application/json; charset=utf-8', 'json'],
    ['application/jsonx', 'json'], // a prefix test, as Go's strings.HasPrefix
    ['application/json; x=application/x-www-form-urlencoded', 'json'],
    ['application/x-www-form-urlencoded', 'form'],
    ['text/plain; x=application/x-www-form-urlencoded', 'form'], // a containment test
    ['multipart/form-data; boundary=x; y=application/x-www-form-urlencoded', 'form'], // form before multipart
    ['multipart/form-data; boundary=x', 'multipart'],
    ['text/plain; x=multipart/form-data', 'multipart'],
    ['Application/JSON', 'none'],
    ['text/plain', 'none'],
    ['', 'none'],
  ])('%j → %s', (ct, kind) => {
    expect(bodyKind(ct)).toBe(kind);
  });
});

describe('modelByContentType: the body is read as its Content-Type says, never by its looks', () => {
  it('reads JSON by a JSON Content-Type only', () => {
    expect(read('application/json', '{"model":"vend-flash-free"}')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(read('text/plain', '{"model":"vend-flash-free"}')).toEqual({ ok: true, model: null });
    expect(read('application/json', '[{"model":"vend-flash-free"}]')).toEqual({ ok: true, model: null });
    expect(read('application/json', '')).toEqual({ ok: true, model: null }); // the relay refuses it: nothing to count
  });

  it('refuses a JSON object it cannot read, and names no model for a body that is no JSON object (the relay answers that one 400 itself)', () => {
    expect(read('application/json', '{"model":"vend-flash-free"')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('application/json', '{"model":"vend-flash-free",}')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('application/json', 'model=vend-flash-free')).toEqual({ ok: true, model: null });
  });

  it('issue #17: a form Content-Type over a JSON body that names another model is refused (readable two ways)', () => {
    expect(read('application/x-www-form-urlencoded', '{"a":"&model=vend-flash-free&input=hi&","model":"gpt-4o"}')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('application/x-www-form-urlencoded', '{"model":"vend-flash-free"}')).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('issue #17: a Content-Type that merely contains the form type is read as a form, as the relay reads it', () => {
    expect(read('text/plain; x=application/x-www-form-urlencoded', 'model=vend-flash-free&input=hi')).toEqual({ ok: true, model: 'vend-flash-free' });
  });

  it('reads forms with Go rules: ; and bad escapes fail, a repeated model fails, case folds', () => {
    expect(read('application/x-www-form-urlencoded', 'model=vend-flash-fre%65')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(read('application/x-www-form-urlencoded', 'MODEL=vend-flash-free')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(read('application/x-www-form-urlencoded', 'model=gpt-4o;model=vend-flash-free')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('application/x-www-form-urlencoded', 'model=%zz')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('application/x-www-form-urlencoded', 'model=gpt-4o&model=vend-flash-free')).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('refuses a form or JSON type the relay misses only because of its letter case', () => {
    expect(read('Application/X-WWW-Form-Urlencoded', 'model=vend-flash-free')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('APPLICATION/JSON', '{"model":"vend-flash-free"}')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(read('Multipart/Form-Data; boundary=b', '')).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('reads multipart where the route does, and a multipart type without a boundary as JSON', () => {
    const body = '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nvend-flash-free\r\n--b--\r\n';
    expect(read('multipart/form-data; boundary=b', body)).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(read('multipart/form-data; boundary=b', body, false)).toEqual({ ok: true, model: null });
    expect(read('multipart/form-data', '{"Model":"vend-flash-free"}')).toEqual({ ok: true, model: 'vend-flash-free' });
    expect(read('text/plain; x=multipart/form-data', body)).toMatchObject({ ok: false, problem: 'invalid' }); // Go cannot parse that media type
    expect(read('multipart/form-data; boundary=b', '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nx')).toMatchObject({ ok: false, problem: 'invalid' });
  });
});
