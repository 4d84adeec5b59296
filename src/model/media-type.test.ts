import { describe, expect, it } from 'vitest';
import { parseMediaType } from './media-type.js';

const params = (v: string) => Object.fromEntries(parseMediaType(v)?.params ?? []);

describe("parseMediaType: Go's mime.ParseMediaType", () => {
  it('lower-cases the type and parameter names, keeps values as sent', () => {
    expect(parseMediaType('Multipart/Form-Data; Boundary=AbC')).toEqual({ type: 'multipart/form-data', params: new Map([['boundary', 'AbC']]) });
    expect(parseMediaType('form-data; name="model"')?.type).toBe('form-data');
  });

  it('reads quoted strings, where a backslash escapes only a special character', () => {
    expect(params('form-data; name="mo\\"del"')).toEqual({ name: 'mo"del' });
    expect(params('form-data; name="mo\\del"')).toEqual({ name: 'mo\\del' }); // MSIE paths: a literal backslash
    expect(params('form-data; name="a;b"; filename="c.wav"')).toEqual({ name: 'a;b', filename: 'c.wav' });
  });

  it('reads unquoted tokens and white space around the separators', () => {
    expect(params('form-data;name=model')).toEqual({ name: 'model' });
    expect(params('form-data ;  name = model ;')).toEqual({ name: 'model' });
  });

  it('accepts a repeated parameter with the same value, fails on two values', () => {
    expect(params('form-data; name=model; name="model"')).toEqual({ name: 'model' });
    expect(parseMediaType('form-data; name=model; name=input')).toBeNull();
  });

  it('stitches RFC 2231 values, which override the plain parameter', () => {
    expect(params("form-data; name=input; name*=utf-8''m%6Fdel")).toEqual({ name: 'model' });
    expect(params('form-data; name*0=mo; name*1=del')).toEqual({ name: 'model' });
    expect(params("form-data; name*0*=utf-8''mo; name*1*=%64el")).toEqual({ name: 'model' });
    expect(params("form-data; name*=iso-8859-1''model")).toEqual({}); // other charsets are left to the caller
  });

  it('fails where Go fails: no type, a bad parameter, an unterminated quote, CR or LF inside quotes', () => {
    for (const v of ['', '; name=model', 'form-data; name', 'form-data; =x', 'form-data; name="model', 'form-data; name="mo\rdel"', 'a/b/c', 'text/plain; x=multipart/form-data']) {
      expect(parseMediaType(v)).toBeNull();
    }
  });

  it('trims the white space Go trims, two-byte U+00A0 included', () => {
    expect(params('form-data;\u00c2\u00a0name=model')).toEqual({ name: 'model' });
  });
});
