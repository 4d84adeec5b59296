import { describe, expect, it } from 'vitest';
import { ModelPrepass } from './prepass.js';
import { MAX_MODEL_BYTES, MAX_TOP_LEVEL_MEMBERS, scanModel } from './scan.js';
import type { ModelScan } from './scan.js';

/**
 * Every vector here also checks the arrival-time prepass: fed in chunks of several sizes (so
 * every kind of token is split somewhere), its hints must leave the answer exactly as it is.
 */
function scan(body: string | Buffer): ModelScan {
  const buf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const plain = scanModel(buf);
  const sizes = buf.length < 4096 ? [1, 2, 3, 5, 7, 16, 33, buf.length] : [4093, 65_536];
  for (const size of sizes) {
    const hints = new ModelPrepass(0);
    for (let i = 0; i < buf.length; i += Math.max(1, size)) hints.feed(buf.subarray(i, i + Math.max(1, size)));
    expect(scanModel(buf, hints), `with hints fed in ${size}-byte chunks`).toEqual(plain);
  }
  return plain;
}

function found(model: string): ModelScan {
  return { kind: 'found', model };
}

const ABSENT: ModelScan = { kind: 'absent' };
const NOT_OBJECT: ModelScan = { kind: 'not-object' };

function expectInvalid(body: string | Buffer): void {
  const result = scan(body);
  expect(result.kind, `${JSON.stringify(result)} for ${String(body).slice(0, 200)}`).toBe('invalid');
}

/** Filler lengths on both sides of the scanner's switch from inline scanning to indexOf. */
const FILLER_LENGTHS = [0, 1, 5, 30, 31, 32, 33, 34, 64, 1000, 100_000];

describe('scanModel: basics', () => {
  it('finds a top-level model', () => {
    expect(scan('{"model":"gpt-4o"}')).toEqual(found('gpt-4o'));
    expect(scan('{"messages":[],"model":"gpt-4o","stream":true}')).toEqual(found('gpt-4o'));
  });

  it('reports an object without a model as absent', () => {
    expect(scan('{}')).toEqual(ABSENT);
    expect(scan('{ }')).toEqual(ABSENT);
    expect(scan('{"messages":[{"role":"user","content":"hi"}]}')).toEqual(ABSENT);
  });

  it('returns an empty model as found, not absent', () => {
    expect(scan('{"model":""}')).toEqual(found(''));
  });

  it.each([
    ['spaces', ' { "model" : "m" , "a" : 1 } '],
    ['tabs', '\t{\t"model"\t:\t"m"\t,\t"a"\t:\t1\t}\t'],
    ['newlines', '\n{\n"model"\n:\n"m"\n,\n"a"\n:\n1\n}\n'],
    ['CRLF', '\r\n{\r\n  "a": 1,\r\n  "model": "m"\r\n}\r\n'],
    ['pretty-printed', JSON.stringify({ a: [1, { b: 2 }], model: 'm', c: { d: [] } }, null, 2)],
    ['no whitespace', '{"a":[1,{"b":2}],"model":"m","c":{"d":[]}}'],
  ])('accepts JSON whitespace: %s', (_name, body) => {
    expect(scan(body)).toEqual(found('m'));
  });

  it('does not treat other characters as whitespace', () => {
    expectInvalid('{\u00a0"model":"m"}');
    expectInvalid('{"model":"m"\v}');
    expectInvalid('{"model":"m"}\f');
  });

  it('keeps non-ASCII model names intact', () => {
    expect(scan('{"model":"模型-ü-😀"}')).toEqual(found('模型-ü-😀'));
  });

  it('skips a UTF-8 byte order mark', () => {
    expect(scan(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"m"}')]))).toEqual(found('m'));
    expect(scan(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('["m"]')]))).toEqual(NOT_OBJECT);
  });
});

describe('scanModel: bodies that are not objects', () => {
  it.each([
    ['empty', ''],
    ['whitespace only', ' \r\n\t '],
    ['array', '[{"model":"x"}]'],
    ['string', '"model"'],
    ['number', '42'],
    ['null', 'null'],
    ['true', 'true'],
    ['form', 'model=vend-flash-free&prompt=hi'],
    ['multipart', '--boundary\r\nContent-Disposition: form-data; name="model"\r\n\r\nx\r\n--boundary--\r\n'],
    ['lone BOM', '\ufeff'],
  ])('%s', (_name, body) => {
    expect(scan(body)).toEqual(NOT_OBJECT);
  });
});

describe('scanModel: escapes', () => {
  it('decodes escapes in the key and the value', () => {
    expect(scan('{"mod\\u0065l":"vend-flash-fre\\u0065"}')).toEqual(found('vend-flash-free'));
    expect(scan('{"\\u006d\\u006f\\u0064\\u0065\\u006c":"m"}')).toEqual(found('m'));
    expect(scan('{"\\u006D\\u006F\\u0044\\u0045\\u004C":"m"}')).toEqual(found('m'));
    expect(scan('{"model":"\\u0076\\u0065\\u006E\\u0064"}')).toEqual(found('vend'));
  });

  it('decodes every simple escape', () => {
    expect(scan('{"model":"a\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti"}')).toEqual(found('a"b\\c/d\be\ff\ng\rh\ti'));
  });

  it('decodes surrogate pairs', () => {
    expect(scan('{"model":"\\ud83d\\ude00"}')).toEqual(found('😀'));
    expect(scan('{"model":"x\\uD83D\\uDE00y"}')).toEqual(found('x😀y'));
  });

  it('turns unpaired surrogates into U+FFFD as Go does', () => {
    expect(scan('{"model":"\\ud83d"}')).toEqual(found('\uFFFD'));
    expect(scan('{"model":"\\ude00"}')).toEqual(found('\uFFFD'));
    expect(scan('{"model":"\\ud83dx"}')).toEqual(found('\uFFFDx'));
    // Go keeps the second escape when it does not complete a pair.
    expect(scan('{"model":"\\ud83d\\u0041"}')).toEqual(found('\uFFFDA'));
    expect(scan('{"model":"\\ud83d\\ud83d\\ude00"}')).toEqual(found('\uFFFD😀'));
    expect(scan('{"model":"\\ude00\\ud83d"}')).toEqual(found('\uFFFD\uFFFD'));
  });

  it('turns each byte of ill-formed UTF-8 into its own U+FFFD as Go does', () => {
    const body = (bytes: number[]): Buffer => Buffer.concat([Buffer.from('{"model":"a'), Buffer.from(bytes), Buffer.from('b"}')]);
    expect(scan(body([0xff]))).toEqual(found('a\uFFFDb'));
    // A truncated three-byte sequence: TextDecoder would emit a single U+FFFD.
    expect(scan(body([0xe2, 0x82]))).toEqual(found('a\uFFFD\uFFFDb'));
    // An encoded surrogate and an overlong slash.
    expect(scan(body([0xed, 0xa0, 0x80]))).toEqual(found('a\uFFFD\uFFFD\uFFFDb'));
    expect(scan(body([0xc0, 0xaf]))).toEqual(found('a\uFFFD\uFFFDb'));
    expect(scan(body([0xe2, 0x82, 0xac]))).toEqual(found('a€b'));
    expect(scan(body([0xf0, 0x9f, 0x98, 0x80]))).toEqual(found('a😀b'));
  });

  it.each([
    ['unknown escape', '{"model":"a\\x"}'],
    ['escaped single quote', '{"model":"a\\\'"}'],
    ['short \\u', '{"model":"\\u12"}'],
    ['non-hex \\u', '{"model":"\\u12G4"}'],
    ['bad second half of a pair', '{"model":"\\ud83d\\uZZZZ"}'],
    ['bad escape in a model key', '{"mod\\el":"m"}'],
    ['bad \\u in a model key', '{"mod\\u006":"m"}'],
    ['raw control character in the value', '{"model":"a\u0001b"}'],
    ['raw newline in the value', '{"model":"a\nb"}'],
    ['raw tab in a candidate key', '{"mod\tel":"m"}'],
  ])('rejects %s', (_name, body) => {
    expectInvalid(body);
  });

  it('refuses a broken key that looks like model, as Go does, whatever comes after it', () => {
    expectInvalid('{"m\\qel":1,"model":"free"}');
    expectInvalid('{"m\u0001del":1,"model":"free"}');
    expectInvalid('{"mod\\x":1,"model":"free"}');
    expectInvalid('{"M\\u00":1,"model":"free"}');
  });

  it('accepts an escaped NUL', () => {
    expect(scan('{"model":"a\\u0000b"}')).toEqual(found('a\u0000b'));
  });
});

describe('scanModel: duplicate and case-folded keys (Go assigns every match in order)', () => {
  // Go's encoding/json takes the last duplicate, current new-api (gjson) the first: refusing
  // disagreeing duplicates is the only answer that matches whichever relay is deployed.
  it('refuses duplicates that disagree, and accepts duplicates that agree', () => {
    expect(scan('{"model":"a","model":"b"}').kind).toBe('invalid');
    expect(scan('{"model":"a","x":1,"model":"a","y":[],"model":"c"}').kind).toBe('invalid');
    expect(scan('{"model":"a","x":1,"model":"\\u0061"}')).toEqual(found('a'));
  });

  it('lets null leave the previous value in place', () => {
    expect(scan('{"model":"a","model":null}')).toEqual(found('a'));
    expect(scan('{"model":null,"model":"b"}')).toEqual(found('b'));
    expect(scan('{"model":null}')).toEqual(ABSENT);
    expect(scan('{"model":null,"MODEL":null}')).toEqual(ABSENT);
  });

  it('matches the key ignoring ASCII case', () => {
    expect(scan('{"Model":"x"}')).toEqual(found('x'));
    expect(scan('{"MODEL":"x"}')).toEqual(found('x'));
    expect(scan('{"mOdEl":"x"}')).toEqual(found('x'));
    expect(scan('{"model":"a","Model":"b"}').kind).toBe('invalid');
    expect(scan('{"MODEL":"a","model":"b"}').kind).toBe('invalid');
    expect(scan('{"MODEL":"a","model":"a"}')).toEqual(found('a'));
    expect(scan('{"Model":"a","model":null}')).toEqual(found('a'));
    expect(scan('{"\\u004dodel":"x"}')).toEqual(found('x'));
  });

  it.each(['models', 'mode', 'model ', ' model', '_model', 'model\\u0000', 'modeł', 'mödel', 'MODEL_ID', 'moDELs'])('ignores the near miss %j', (key) => {
    expect(scan(`{"${key}":"x"}`)).toEqual(ABSENT);
  });
});

describe('scanModel: only the top level counts', () => {
  it('ignores model keys in nested objects and arrays', () => {
    expect(scan('{"messages":[{"model":"x"}],"model":"y"}')).toEqual(found('y'));
    expect(scan('{"model":"y","messages":[{"model":"x"}]}')).toEqual(found('y'));
    expect(scan('{"a":{"model":"x"}}')).toEqual(ABSENT);
    expect(scan('{"a":{"b":{"c":[[{"model":"x"}]]}},"model":"y","d":{"model":"z"}}')).toEqual(found('y'));
    expect(scan('{"a":["model","x"],"b":{"model":5}}')).toEqual(ABSENT);
  });

  it('is not fooled by model-like text and brackets inside strings', () => {
    expect(scan('{"a":"{\\"model\\":\\"x\\"}","model":"y"}')).toEqual(found('y'));
    expect(scan('{"a":"}]}]","model":"y"}')).toEqual(found('y'));
    expect(scan('{"a":["]}\\"model\\":\\"x", "{["],"model":"y"}')).toEqual(found('y'));
    expect(scan('{"a":{"b":"}","model":"x"},"model":"y"}')).toEqual(found('y'));
    expect(scan('{"a":"\\",\\"model\\":\\"x","model":"y"}')).toEqual(found('y'));
  });

  it.each(FILLER_LENGTHS)('tells escaped quotes from closing ones after %i filler bytes', (n) => {
    const f = 'f'.repeat(n);
    // `\\"` is an escaped backslash followed by the closing quote.
    expect(scan(`{"a":"${f}\\\\","model":"y"}`)).toEqual(found('y'));
    // `\\\"` is an escaped backslash followed by an escaped quote: the string goes on.
    expect(scan(`{"a":"${f}\\\\\\",\\"model\\":\\"x","model":"y"}`)).toEqual(found('y'));
    expect(scan(`{"a":"${f}\\",\\"model\\":\\"x\\\\\\\\","model":"y"}`)).toEqual(found('y'));
    expect(scan(`{"a":["${f}\\\\"],"model":"y"}`)).toEqual(found('y'));
    expect(scan(`{"a":["${f}\\"]",{"model":"x"}],"model":"y"}`)).toEqual(found('y'));
    // A model past MAX_MODEL_BYTES is not read (its own test below).
    const asModel = (m: string): ModelScan => (n + 2 > MAX_MODEL_BYTES ? { kind: 'unread', reason: expect.any(String) as string } : found(m));
    expect(scan(`{"model":"${f}\\\\"}`)).toEqual(asModel(`${f}\\`));
    expect(scan(`{"model":"${f}\\""}`)).toEqual(asModel(`${f}"`));
    expect(scan(`{"${f}":"${f}","model":"${f}"}`)).toEqual(asModel(f));
  });

  it.each(FILLER_LENGTHS)('notices an unterminated string after %i filler bytes', (n) => {
    const f = 'f'.repeat(n);
    expectInvalid(`{"a":"${f}\\"}`);
    expectInvalid(`{"a":["${f}\\"]}`);
    expectInvalid(`{"model":"${f}\\"}`);
    expectInvalid(`{"a":"${f}\\\\\\"}`);
  });

  it('agrees with JSON.parse on documents built by JSON.stringify', () => {
    const random = mulberry32(0x5eed);
    for (let i = 0; i < 400; i++) {
      const doc = randomTopLevel(random);
      const body = JSON.stringify(doc, null, random() < 0.3 ? 2 : undefined);
      expect(scan(body), body).toEqual(expectedFromParsed(JSON.parse(body) as Record<string, unknown>));
    }
  });
});

describe('scanModel: values of other keys', () => {
  it('skips numbers and literals', () => {
    const body = '{"a":true,"b":false,"c":null,"d":-1.5e+10,"e":0,"f":[1,2.0,-3e-2],"g":1E5,"h":-0,"i":0.25,"model":"m"}';
    expect(scan(body)).toEqual(found('m'));
  });

  it.each([
    ['truncated true', '{"a":tru,"model":"m"}'],
    ['truncated null', '{"a":nul}'],
    ['misspelt false', '{"a":fals3}'],
    ['literal with a tail', '{"a":truex}'],
    ['capitalised literal', '{"a":True}'],
    ['leading zero', '{"a":01}'],
    ['bare minus', '{"a":-}'],
    ['leading plus', '{"a":+1}'],
    ['leading dot', '{"a":.5}'],
    ['trailing dot', '{"a":1.}'],
    ['empty exponent', '{"a":1e}'],
    ['signed empty exponent', '{"a":1e+}'],
    ['hex', '{"a":0x10}'],
    ['NaN', '{"a":NaN}'],
    ['unquoted word', '{"a":hello}'],
    ['missing value', '{"a":}'],
    ['single-quoted string', '{"a":\'x\'}'],
  ])('rejects a bad top-level value: %s', (_name, body) => {
    expectInvalid(body);
  });
});

describe('scanModel: a model that is not a string', () => {
  it.each(['1', '-2.5', 'true', 'false', '{}', '{"id":"m"}', '[]', '["m"]'])('rejects model %s', (value) => {
    expectInvalid(`{"model":${value}}`);
    // Go fails the whole decode, so a later string value does not rescue it.
    expectInvalid(`{"model":${value},"model":"m"}`);
    expectInvalid(`{"model":"m","Model":${value}}`);
  });

  it('says why', () => {
    expect(scan('{"model":5}')).toEqual({ kind: 'invalid', reason: expect.stringContaining('must be a string') as string });
  });

  it('still ignores non-string models in nested objects', () => {
    expect(scan('{"a":{"model":5},"model":"m"}')).toEqual(found('m'));
  });
});

describe('scanModel: broken structure', () => {
  it.each([
    ['missing colon', '{"model" "m"}'],
    ['missing comma', '{"a":1 "model":"m"}'],
    ['trailing comma', '{"model":"m",}'],
    ['leading comma', '{,"model":"m"}'],
    ['double comma', '{"a":1,,"model":"m"}'],
    ['unquoted key', '{model:"m"}'],
    ['number key', '{1:"m"}'],
    ['array closing the object', '{"model":"m"]'],
    ['mismatched nested brackets', '{"a":[1,2},"model":"m"}'],
    ['mismatched nested braces', '{"a":{"b":1]],"model":"m"}'],
    ['extra closing bracket', '{"a":[1]],"model":"m"}'],
    ['data after the object', '{"model":"m"}x'],
    ['second object', '{"model":"m"}{"model":"n"}'],
    ['second object after whitespace', '{"model":"m"}\n{"model":"n"}'],
    ['extra closing brace', '{"model":"m"}}'],
    ['comment', '{"model":"m"} // free'],
  ])('%s', (_name, body) => {
    expectInvalid(body);
  });

  it('accepts nesting exactly as deep as Go does, and no deeper', () => {
    // Go's limit counts the top-level object: 10,000 levels in all.
    const ok = `{"a":${'['.repeat(9_999)}${']'.repeat(9_999)},"model":"m"}`;
    expect(scan(ok)).toEqual(found('m'));
    const tooDeep = `{"a":${'['.repeat(10_000)}${']'.repeat(10_000)},"model":"m"}`;
    expectInvalid(tooDeep);
  });

  it('gives invalid for every truncation of a document', () => {
    const doc = JSON.stringify({
      temperature: 0.7,
      messages: [
        { role: 'system', content: 'You are "helpful" \\ {not} [an] object' },
        { role: 'user', content: [{ type: 'text', text: '{"model":"x"}' }], model: 'nested' },
      ],
      Model: 'vend-flash-free',
      stream: true,
      stop: null,
      n: -1e3,
      tools: [],
      meta: {},
      model: 'vend-flash-fre\\u0065',
      logit_bias: { '50256': -100 },
    }).replace('fre\\\\u0065', 'fre\\u0065');
    const bytes = Buffer.from(doc);
    expect(scanModel(bytes)).toEqual(found('vend-flash-free'));
    expect(scanModel(bytes.subarray(0, 0))).toEqual(NOT_OBJECT);
    for (let cut = 1; cut < bytes.length; cut++) {
      const result = scanModel(bytes.subarray(0, cut));
      expect(result.kind, `cut at ${cut}: ${bytes.toString('utf8', 0, cut)}`).toBe('invalid');
    }
  });

  it('gives invalid for every truncation of a pretty-printed document', () => {
    const doc = JSON.stringify({ a: [1, { b: 'c\\"' }], model: 'm', c: { d: [true, false, null] } }, null, 2);
    const bytes = Buffer.from(doc);
    expect(scanModel(bytes)).toEqual(found('m'));
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(scanModel(bytes.subarray(0, cut)).kind, `cut at ${cut}`).toBe('invalid');
    }
  });

  it('reports truncation in the reason', () => {
    const result = scan('{"model":"m","messages":[{"content":"abc');
    expect(result.kind).toBe('invalid');
    expect(result.kind === 'invalid' && result.reason).toMatch(/truncated/);
  });
});

describe('scanModel: bounds on what it reads', () => {
  it(`reads up to ${MAX_TOP_LEVEL_MEMBERS} top-level fields; past that, unread`, () => {
    expect(scan(`{${'"f":1,'.repeat(MAX_TOP_LEVEL_MEMBERS - 1)}"model":"m"}`)).toEqual(found('m'));
    expect(scan(`{${'"f":1,'.repeat(MAX_TOP_LEVEL_MEMBERS)}"model":"m"}`)).toEqual({ kind: 'unread', reason: expect.stringContaining('top-level fields') as string });
  });

  it(`reads a model of up to ${MAX_MODEL_BYTES} bytes as sent; past that, unread`, () => {
    expect(scan(`{"model":"${'m'.repeat(MAX_MODEL_BYTES)}"}`)).toEqual(found('m'.repeat(MAX_MODEL_BYTES)));
    expect(scan(`{"model":"${'m'.repeat(MAX_MODEL_BYTES + 1)}"}`)).toEqual({ kind: 'unread', reason: expect.stringContaining('longer than') as string });
  });
});

describe('scanModel: 20 MB bodies', () => {
  const MB20 = 20 * 1024 * 1024;
  const filler = Buffer.alloc(MB20, 'x');

  function bodyWith(before: string, after: string): Buffer {
    return Buffer.concat([Buffer.from(before), filler, Buffer.from(after)]);
  }

  it('finds the model at the start', () => {
    expect(scanModel(bodyWith('{"model":"m","messages":[{"role":"user","content":"', '"}]}'))).toEqual(found('m'));
  });

  it('finds the model in the middle', () => {
    const half = Buffer.alloc(MB20 / 2, 'y');
    const body = Buffer.concat([Buffer.from('{"a":"'), half, Buffer.from('","model":"m","b":"'), half, Buffer.from('"}')]);
    expect(scanModel(body)).toEqual(found('m'));
  });

  it('finds the model at the end', () => {
    expect(scanModel(bodyWith('{"messages":[{"role":"user","content":"', '"}],"model":"m"}'))).toEqual(found('m'));
  });

  it('ignores a nested model after a huge string and takes the top-level one', () => {
    const body = bodyWith('{"messages":[{"content":"', '","model":"nested"}],"model":"top","extra":{"model":"x"}}');
    expect(scanModel(body)).toEqual(found('top'));
  });

  it('refuses disagreeing duplicates spread across the body', () => {
    expectInvalid(bodyWith('{"model":"first","a":"', '","MODEL":"last"}'));
  });

  it('notices a body truncated inside the huge string', () => {
    expectInvalid(bodyWith('{"model":"m","messages":[{"content":"', ''));
    expectInvalid(bodyWith('{"model":"m","messages":[{"content":"', '"}]'));
  });

  it('leaves a 20 MB model value unread', () => {
    const body = bodyWith('{"model":"', '"}');
    expect(scanModel(body)).toEqual({ kind: 'unread', reason: `the "model" field is longer than ${MAX_MODEL_BYTES} bytes` });
  });

  it('finds the model after escape-heavy JSON-in-JSON content', () => {
    const inner = JSON.stringify({ model: 'inner', args: 'a "quoted" \\ value', list: ['}', ']'] });
    const content = JSON.stringify(inner.repeat(Math.ceil(MB20 / inner.length)));
    const body = Buffer.from(`{"tool_arguments":${content},"model":"m"}`);
    expect(body.length).toBeGreaterThan(MB20);
    expect(scanModel(body)).toEqual(found('m'));
  });

  it('finds the model after many small messages', () => {
    const message = Buffer.from('{"role":"user","content":[{"type":"text","text":"hi \\"model\\": [1]"}],"model":"no"},');
    const count = Math.ceil(MB20 / message.length);
    const messages = Buffer.alloc(message.length * count);
    for (let i = 0; i < count; i++) message.copy(messages, i * message.length);
    const body = Buffer.concat([Buffer.from('{"messages":['), messages, Buffer.from('{}],"model":"m"}')]);
    expect(scanModel(body)).toEqual(found('m'));
  });

  it('finds the model after a large array of numbers', () => {
    const numbers = Array.from({ length: 500_000 }, (_, i) => (i % 7 === 0 ? -i * 1.5 : i));
    const body = Buffer.from(`{"input":${JSON.stringify(numbers)},"model":"m"}`);
    expect(scanModel(body)).toEqual(found('m'));
  });
});

/** Small seeded PRNG so a failing case can be reproduced. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TRICKY_CHARS = ['"', '\\', '{', '}', '[', ']', ':', ',', '\n', '\u0001', 'é', '模', '😀', '\ud800', 'model', 'x', ' '];
const KEYS = ['model', 'Model', 'MODEL', 'messages', 'content', 'models', 'mode', 'a', 'b', 'temperature'];

function randomString(random: () => number): string {
  let s = '';
  const n = Math.floor(random() * 12);
  for (let i = 0; i < n; i++) s += TRICKY_CHARS[Math.floor(random() * TRICKY_CHARS.length)];
  if (random() < 0.05) s += 'z'.repeat(Math.floor(random() * 200));
  return s;
}

function randomValue(random: () => number, depth: number): unknown {
  const r = random();
  if (depth > 4 || r < 0.3) return randomString(random);
  if (r < 0.4) return Math.floor((random() - 0.5) * 1e6) / 100;
  if (r < 0.45) return random() < 0.5;
  if (r < 0.5) return null;
  if (r < 0.75) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  const obj: Record<string, unknown> = {};
  const n = Math.floor(random() * 4);
  for (let i = 0; i < n; i++) obj[KEYS[Math.floor(random() * KEYS.length)]!] = randomValue(random, depth + 1);
  return obj;
}

function randomTopLevel(random: () => number): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  const n = Math.floor(random() * 6);
  for (let i = 0; i < n; i++) {
    const key = KEYS[Math.floor(random() * KEYS.length)]!;
    const isModel = key.toLowerCase() === 'model';
    doc[key] = isModel ? (random() < 0.2 ? null : randomString(random)) : randomValue(random, 1);
  }
  return doc;
}

/**
 * JSON.parse keeps insertion order for these keys and the documents have no duplicates, so
 * Go's "every case-folded match assigns, null leaves the value" is a fold over the entries.
 */
function expectedFromParsed(parsed: Record<string, unknown>): ModelScan {
  let model: string | undefined;
  for (const [key, value] of Object.entries(parsed)) {
    if (key.toLowerCase() !== 'model' || value === null) continue;
    if (typeof value !== 'string') return { kind: 'invalid', reason: expect.any(String) as string };
    // Go (like the scanner) decodes an unpaired surrogate as U+FFFD.
    const v = value.replace(/[\ud800-\udfff]/g, (c, offset: number, whole: string) => (isPaired(whole, offset) ? c : '\uFFFD'));
    if (model !== undefined && model !== v) return { kind: 'invalid', reason: expect.any(String) as string };
    model = v;
  }
  return model === undefined ? ABSENT : found(model);
}

function isPaired(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  if (c <= 0xdbff) {
    const next = s.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff;
  }
  const prev = s.charCodeAt(i - 1);
  return prev >= 0xd800 && prev <= 0xdbff;
}
