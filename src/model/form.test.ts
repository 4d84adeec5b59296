import { describe, expect, it } from 'vitest';
import { firstQueryValue, mapField, matchesFolded, parseQuery, structField } from './form.js';

const fields = (s: string) => {
  const r = parseQuery(s);
  if (!r.ok) throw new Error(r.reason);
  return r.fields;
};

describe("parseQuery: Go's url.ParseQuery", () => {
  it('splits on & and the first =, unescapes + and %XX in names and values', () => {
    expect(fields('model=vend-flash-free&input=hi+there&x=a%3Db=c')).toEqual([
      ['model', 'vend-flash-free'],
      ['input', 'hi there'],
      ['x', 'a=b=c'],
    ]);
    expect(fields('m%6Fdel=x')).toEqual([['model', 'x']]);
  });

  it('skips empty pairs and reads a pair without = as an empty value', () => {
    expect(fields('&&model&a=&=b')).toEqual([
      ['model', ''],
      ['a', ''],
      ['', 'b'],
    ]);
  });

  it('keeps escaped bytes as bytes (latin1 chars), valid UTF-8 or not', () => {
    expect(fields('m=%E6%A8%A1&n=%FF')).toEqual([
      ['m', '\u00e6\u00a8\u00a1'],
      ['n', '\u00ff'],
    ]);
  });

  it('fails the whole form on a ; anywhere in a pair (Go 1.17 and later), as new-api then answers 400', () => {
    expect(parseQuery('model=vend-flash-free;x=1')).toMatchObject({ ok: false });
    expect(parseQuery('a=1;model=vend-flash-free&model=gpt-4o')).toMatchObject({ ok: false });
    expect(parseQuery('model=gpt-4o&note=a;b')).toMatchObject({ ok: false });
  });

  it('fails the whole form on a bad escape, in a name or a value', () => {
    for (const s of ['model=%zz', 'model=%', 'model=%6', 'mo%dxl=x', 'model=x&a=%g0']) expect(parseQuery(s)).toMatchObject({ ok: false });
  });

  it('reads a JSON body declared as a form the way Go does: the issue #17 body names the free model', () => {
    expect(structField(fields('{"a":"&model=vend-flash-free&input=hi&","model":"gpt-4o"}'), 'model')).toEqual({ ok: true, value: 'vend-flash-free' });
  });
});

describe("structField: new-api's form map decoded into its model struct", () => {
  it('matches the field name ignoring case, as encoding/json does', () => {
    expect(structField(fields('MODEL=vend-flash-free'), 'model')).toEqual({ ok: true, value: 'vend-flash-free' });
    expect(structField(fields('Model=x&other=y'), 'model')).toEqual({ ok: true, value: 'x' });
  });

  it('refuses a repeated field (new-api decodes it into an array and fails) and two spellings of it', () => {
    expect(structField(fields('model=a&model=b'), 'model')).toMatchObject({ ok: false });
    expect(structField(fields('model=a&model=a'), 'model')).toMatchObject({ ok: false });
    expect(structField(fields('model=a&Model=b'), 'model')).toMatchObject({ ok: false });
  });

  it('decodes the value as Go coerces a string to UTF-8: each stray byte one U+FFFD', () => {
    expect(structField(fields('model=vend-flash-fre%65'), 'model')).toEqual({ ok: true, value: 'vend-flash-free' });
    expect(structField(fields('model=%E6%A8%A1%E5%9E%8B'), 'model')).toEqual({ ok: true, value: '模型' });
    expect(structField(fields('model=a%FF%FEb'), 'model')).toEqual({ ok: true, value: 'a\uFFFD\uFFFDb' });
  });

  it('is null when no field matches', () => {
    expect(structField(fields('input=hi&modelx=y'), 'model')).toEqual({ ok: true, value: null });
  });
});

describe('matchesFolded: Go folds only ASCII case, and the Kelvin sign, long s and Turkish i onto ASCII', () => {
  it.each([
    ['model', 'model', true],
    ['MoDeL', 'model', true],
    ['customid', 'customId', true],
    ['cu\u017ftomId', 'customId', true], // long s
    ['custom\u0130d', 'customId', true],
    ['task_\u212aey', 'task_key', true], // Kelvin sign
    ['mode1', 'model', false],
    ['modél', 'model', false],
    ['models', 'model', false],
  ])('%j vs %j: %s', (key, name, same) => {
    expect(matchesFolded(key, name)).toBe(same);
  });
});

describe('mapField: m[name].(string) on the map new-api builds', () => {
  it('matches the exact name only; a repeated one is an array, no string', () => {
    expect(mapField(fields('model_name=kling-v1&Model_name=x'), 'model_name')).toBe('kling-v1');
    expect(mapField(fields('model_name=a&model_name=b'), 'model_name')).toBe('');
    expect(mapField(fields('other=1'), 'model_name')).toBe('');
  });
});

describe("firstQueryValue: gin's c.Query", () => {
  it('takes the first value of the exact name, escapes decoded', () => {
    expect(firstQueryValue('model=gpt-4o-realtime&model=vend-flash-free', 'model')).toBe('gpt-4o-realtime');
    expect(firstQueryValue('m%6Fdel=vend-flash-free', 'model')).toBe('vend-flash-free');
    expect(firstQueryValue('Model=x', 'model')).toBeNull();
    expect(firstQueryValue('', 'model')).toBeNull();
  });

  it('skips the pairs Go cannot parse and reads on', () => {
    expect(firstQueryValue('model=a;b&model=vend-flash-free', 'model')).toBe('vend-flash-free');
    expect(firstQueryValue('model=%zz&model=x', 'model')).toBe('x');
  });
});
