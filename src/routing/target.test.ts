import { describe, expect, it } from 'vitest';
import type { Clock } from '../runtime/clock.js';
import { DEFAULT_IP_LIMITS, DEFAULTS } from '../config/index.js';
import { FreeTierLimiter } from '../limits/free-tier.js';
import type { LimitStore } from '../limits/guard.js';
import { compileIpRules } from '../limits/ip.js';
import { requestedModel } from '../model/index.js';
import { modelFromPath } from '../model/path.js';
import { routeOf, wildcardPlan } from './routes.js';
import { invalidTargetReason, parseTarget, type Target } from './target.js';

function target(url: string): Target {
  const t = parseTarget(url);
  if (t === null) throw new Error(`parseTarget refused ${url}`);
  return t;
}

const pathOf = (url: string) => target(url).path;

/** The model the gateway reads from the path: parseTarget, then the decoded path to modelFromPath. */
const modelOf = (url: string) => modelFromPath(target(url).path);

describe('parseTarget', () => {
  it('keeps a path without escapes as it is, and forwards it as sent', () => {
    expect(parseTarget('/v1/chat/completions?x=1')).toMatchObject({ path: '/v1/chat/completions', forwardUrl: '/v1/chat/completions?x=1' });
    expect(parseTarget(undefined)).toMatchObject({ path: '/', forwardUrl: '/' });
  });

  it.each(['*', 'http://relay/v1/chat/completions', '', 'v1/chat/completions'])('refuses a target that is not origin-form: %j', (url) => {
    expect(parseTarget(url)).toBeNull();
  });

  it('collapses repeated slashes in the path, as http-proxy does, and not in the query', () => {
    expect(parseTarget('//v1///chat//completions?next=//x')).toMatchObject({ path: '/v1/chat/completions', forwardUrl: '/v1/chat/completions?next=//x' });
  });

  describe('percent-decoding, once and the Go way', () => {
    it('decodes the path for decisions and forwards the escapes as sent', () => {
      expect(parseTarget('/%761/chat/completions')).toMatchObject({ path: '/v1/chat/completions', forwardUrl: '/%761/chat/completions' });
      expect(pathOf('/v1beta/models/%76%65%6E%64-flash-free:generateContent')).toBe('/v1beta/models/vend-flash-free:generateContent');
      expect(pathOf('/v1beta/models/vend-flash-free%3agenerateContent')).toBe('/v1beta/models/vend-flash-free:generateContent');
    });

    it('decodes %2525 once, to %25', () => {
      expect(parseTarget('/v1beta/models/a%2525b:generateContent')).toMatchObject({
        path: '/v1beta/models/a%25b:generateContent',
        forwardUrl: '/v1beta/models/a%2525b:generateContent',
      });
      expect(pathOf('/v1/chat/completion%2573')).toBe('/v1/chat/completion%73');
    });

    it('decodes %253A to the text %3A, not to a colon', () => {
      expect(pathOf('/v1beta/models/vend-flash-free%253AgenerateContent')).toBe('/v1beta/models/vend-flash-free%3AgenerateContent');
    });

    it('decodes %2F to a slash, like Go, and leaves the slashes that makes as the relay sees them', () => {
      expect(pathOf('/v1beta%2Fmodels/gemini:generateContent')).toBe('/v1beta/models/gemini:generateContent');
      expect(pathOf('/v1beta/models/tuned%2fx:generateContent')).toBe('/v1beta/models/tuned/x:generateContent');
      // gin routes `/v1//chat/completions` nowhere (a 404): not the chat route.
      expect(parseTarget('/v1%2F%2Fchat/completions')).toMatchObject({ path: '/v1//chat/completions', forwardUrl: '/v1%2F%2Fchat/completions' });
      expect(pathOf('/v1beta/models/a%252Fb:generateContent')).toBe('/v1beta/models/a%2Fb:generateContent');
    });

    it('leaves + alone, as path decoding does', () => {
      expect(pathOf('/v1beta/models/a+b%2Bc:generateContent')).toBe('/v1beta/models/a+b+c:generateContent');
    });

    it('decodes multi-byte UTF-8 and %00', () => {
      expect(pathOf('/v1beta/models/mod%C3%A8le:generateContent')).toBe('/v1beta/models/modèle:generateContent');
      expect(pathOf('/v1/x%00y')).toBe('/v1/x\u0000y');
    });

    it('accepts escapes that decode to bytes that are not UTF-8, as Go does, reading them as U+FFFD', () => {
      expect(parseTarget('/v1beta/models/gemini%FF:generateContent')).toMatchObject({
        path: '/v1beta/models/gemini\uFFFD:generateContent',
        forwardUrl: '/v1beta/models/gemini%FF:generateContent',
      });
      // A truncated sequence never swallows the ASCII after it.
      expect(pathOf('/v1beta/models/a%E3:generateContent')).toBe('/v1beta/models/a\uFFFD:generateContent');
      expect(pathOf('/v1%C3/chat/completions')).toBe('/v1\uFFFD/chat/completions');
      expect(pathOf('/%C0%AFv1')).toBe('/\uFFFD\uFFFDv1'); // an overlong '/' is not a slash
    });

    it.each([
      '/v1beta/models/vend%zzfree:generateContent',
      '/v1beta/models/vend%:generateContent',
      '/v1beta/models/vend%6:generateContent',
      '/v1beta/models/free%',
      '/v1beta/models/free%6',
      '/v1/models/%:generateContent',
      '/v1/engines/%g0/embeddings',
      '/v1/%%76',
      '/v1/%-1',
      // Malformed anywhere, even outside the model segment: Go's server refuses the whole request.
      '/v1beta/models/vend-flash-fre%65:generate%zz',
      '/v1/engines/vend-flash-fre%65/embed%dings',
      '/%zz/v1/chat/completions?x=1',
    ])('gives null (the gateway answers 400, as Go net/http does) for the malformed escape in %s', (url) => {
      expect(parseTarget(url)).toBeNull();
    });

    it('does not judge escapes in the query, which Go does not parse while routing', () => {
      expect(parseTarget('/v1/chat/completions?x=%zz&y=%FF%')).toMatchObject({ path: '/v1/chat/completions', forwardUrl: '/v1/chat/completions?x=%zz&y=%FF%' });
    });
  });

  describe('the key= query on /v1beta', () => {
    it('removes key= and keeps the rest', () => {
      expect(target('/v1beta/models/gemini:generateContent?key=abc&alt=sse').forwardUrl).toBe('/v1beta/models/gemini:generateContent?alt=sse');
      expect(target('/v1beta/models/gemini:generateContent?alt=sse&k%65y=abc').forwardUrl).toBe('/v1beta/models/gemini:generateContent?alt=sse');
      expect(target('/v1beta/models/gemini:generateContent?key=abc').forwardUrl).toBe('/v1beta/models/gemini:generateContent');
      // Names read as Go's url.ParseQuery reads them: `+` a space, a bad escape no name at all.
      expect(target('/v1beta/models/gemini:generateContent?ke%79=a&key+=b&k%zzey=c').forwardUrl).toBe('/v1beta/models/gemini:generateContent?key+=b&k%zzey=c');
    });

    it('removes it when /v1beta is reached only once decoded', () => {
      expect(target('/v1bet%61/models/gemini:generateContent?key=abc&alt=sse').forwardUrl).toBe('/v1bet%61/models/gemini:generateContent?alt=sse');
      expect(target('//v1beta%2Fmodels/gemini:generateContent?key=abc').forwardUrl).toBe('/v1beta%2Fmodels/gemini:generateContent');
    });

    it('leaves the query alone elsewhere, and on a path that is /v1beta only when decoded twice', () => {
      expect(target('/v1/chat/completions?key=abc').forwardUrl).toBe('/v1/chat/completions?key=abc');
      expect(target('/v1bet%2561/models/gemini:generateContent?key=abc').forwardUrl).toBe('/v1bet%2561/models/gemini:generateContent?key=abc');
    });
  });
});

describe('the model named in the path, read as the gateway reads it (parseTarget, then modelFromPath)', () => {
  it('decodes the model id', () => {
    expect(modelOf('/v1beta/models/vend-flash-fre%65:generateContent')).toBe('vend-flash-free');
    expect(modelOf('/v1beta/models/%76%65%6E%64-flash-free:generateContent')).toBe('vend-flash-free');
    expect(modelOf('/v1/models/vend-flash-fre%65:generateContent')).toBe('vend-flash-free');
    expect(modelOf('/v1/engines/vend-flash-fre%65/embeddings')).toBe('vend-flash-free');
    expect(modelOf('/v1beta/models/vend-flash-fre%65')).toBe('vend-flash-free');
    expect(modelOf('/v1beta/models/mod%C3%A8le:generateContent')).toBe('modèle');
    expect(modelOf('/v1beta/models/a+b:generateContent')).toBe('a+b');
  });

  it('decodes %2525 once: a%2525b is the model a%25b, as the relay reads it', () => {
    expect(modelOf('/v1beta/models/a%2525b:generateContent')).toBe('a%25b');
    expect(modelOf('/v1/models/a%2525b:generateContent')).toBe('a%25b');
    expect(modelOf('/v1/engines/a%2525b/embeddings')).toBe('a%25b');
    expect(modelOf('/v1beta/models/vend-flash-fre%2565:generateContent')).toBe('vend-flash-fre%65');
  });

  it('splits on an encoded colon, because the relay decodes the path before splitting', () => {
    expect(modelOf('/v1beta/models/vend-flash-free%3AgenerateContent')).toBe('vend-flash-free');
    expect(modelOf('/v1/models/vend-flash-free%3agenerateContent')).toBe('vend-flash-free');
  });

  it('does not split on %253A, which is the text %3A once decoded', () => {
    expect(modelOf('/v1beta/models/vend-flash-free%253AgenerateContent')).toBe('vend-flash-free%3AgenerateContent');
    expect(modelOf('/v1beta/models/x%253Avend-flash-free:generateContent')).toBe('x%3Avend-flash-free');
    // Without a real colon a POST to `/v1/models/{id}` names the whole rest, as the relay reads it.
    expect(modelOf('/v1/models/vend-flash-free%253AgenerateContent')).toBe('vend-flash-free%3AgenerateContent');
  });

  it('reads the model from a Gemini path whose task marker only a collapsed slash would make (`/v1/%2Fvideos`), as the relay does', () => {
    // The relay's distributor tests `/v1/videos` on its decoded path, `.../v1//videos`: no task,
    // the model from the path. Collapsed here, the body was read instead, and a free call passed uncounted.
    for (const url of [
      '/v1beta/models/vend-flash-free:generateContent/v1/%2Fvideos',
      '/v1beta/models/vend-flash-free:streamGenerateContent/v1/%2Fvideo/generations',
      '/v1/models/vend-flash-free:generateContent/v1/%2Fvideos',
    ]) {
      expect(wildcardPlan(pathOf(url)).kind, url).toBe('path');
      expect(modelOf(url), url).toBe('vend-flash-free');
    }
  });

  it('reads %2F inside the model segment as a slash', () => {
    expect(modelOf('/v1beta/models/tuned%2Fx:generateContent')).toBe('tuned/x');
    expect(modelOf('/v1/models/tuned%2Fx:generateContent')).toBe('tuned/x');
    // `/v1/engines/a/b/embeddings` is no relay route: the engine model is one segment.
    expect(modelOf('/v1/engines/a%2Fb/embeddings')).toBeUndefined();
    expect(modelOf('/v1beta%2Fmodels/gemini:generateContent')).toBe('gemini');
    expect(modelOf('/v1beta/models%2Fgemini:generateContent')).toBe('gemini');
    expect(modelOf('/v1beta/models/tuned%252Fx:generateContent')).toBe('tuned%2Fx');
  });

  it('reads an escape that is not UTF-8 as the relay would serve it: a model no UTF-8 name equals', () => {
    expect(modelOf('/v1beta/models/gemini%FF:generateContent')).toBe('gemini\uFFFD');
    expect(modelOf('/v1beta/models/vend-flash-fre%E5:generateContent')).toBe('vend-flash-fre\uFFFD');
    expect(modelOf('/v1beta/models/vend-flash-fre%FF%65:generateContent')).toBe('vend-flash-fre\uFFFDe');
  });

  it("is what requestedModel, the gateway's call, answers for the decoded path", async () => {
    expect(await requestedModel('POST', target('/v1beta/models/a%2525b:generateContent').path, {}, null, 1024)).toEqual({ ok: true, model: 'a%25b' });
    expect(await requestedModel('POST', target('/v1beta/models/vend-flash-fre%65:generateContent').path, {}, null, 1024)).toEqual({ ok: true, model: 'vend-flash-free' });
  });
});

describe('decisions are taken on the path decoded once', () => {
  const noStore = {} as LimitStore;
  const noClock = {} as Clock;

  it('free tier: a name that is free only when decoded twice is not free, and one free once decoded is', () => {
    const listed = new FreeTierLimiter({ ...DEFAULTS.freeTier, models: ['a%25b', 'vend-flash-free'] }, noStore, noClock);
    expect(listed.isFree(modelOf('/v1beta/models/a%2525b:generateContent')!)).toBe(true);
    expect(listed.isFree(modelOf('/v1beta/models/a%25b:generateContent')!)).toBe(false); // a%b
    expect(listed.isFree(modelOf('/v1beta/models/vend-flash-fre%65:generateContent')!)).toBe(true);
    expect(listed.isFree(modelOf('/v1beta/models/vend-flash-fre%2565:generateContent')!)).toBe(false);
    expect(listed.isFree(modelOf('/v1beta/models/vend-flash-free%FF:generateContent')!)).toBe(false);

    const bySuffix = new FreeTierLimiter({ ...DEFAULTS.freeTier }, noStore, noClock);
    // Decoded twice this was the model `x`; the relay serves `x%3Avend-flash-free`.
    expect(bySuffix.isFree(modelOf('/v1beta/models/x%253Avend-flash-free:generateContent')!)).toBe(true);
  });

  it('credentials: which headers carry a key follows the once-decoded path', () => {
    expect(routeOf(pathOf('/v1beta%2Fmodels/gemini:generateContent')).xGoogApiKey).toBe(true);
    expect(routeOf(pathOf('/v1bet%61/models/gemini:generateContent')).xGoogApiKey).toBe(true);
    expect(routeOf(pathOf('/v1beta%252Fmodels/gemini:generateContent')).xGoogApiKey).toBe(false);
    expect(routeOf(pathOf('/v1/m%65ssages')).xApiKey).toBe(true);
    expect(routeOf(pathOf('/v1/m%2565ssages')).xApiKey).toBe(false);
    expect(routeOf(pathOf('/v1/models%2Fgpt-4o')).xApiKey).toBe(true);
  });

  it('per-IP limits: rules match the once-decoded path', () => {
    const match = compileIpRules(DEFAULT_IP_LIMITS);
    expect(match(pathOf('/api/log/%74oken'))?.name).toBe('usage-query');
    expect(match(pathOf('/%61pi%2Flog//token'))?.name).toBe('usage-query');
    expect(match(pathOf('/api/log/%2574oken'))?.name).toBe('api-and-dashboard'); // `/api/log/%74oken`, under /api/*
    expect(match(pathOf('/%2561pi/log/token'))).toBeNull(); // `/%61pi/log/token`
    expect(match(pathOf('/v1/dashboard%2Fbilling/usage'))?.name).toBe('api-and-dashboard');
  });
});

describe('dot segments: refused, never matched as one path and forwarded as another', () => {
  it.each([
    '/x/../api/log/token',
    '/api/log/./token',
    '/x/../v1/chat/completions',
    '/v1/chat/completions/..',
    '/v1/chat/completions/.',
    '/x/%2e%2e/api/log/token',
    '/x/.%2E/api/log/token',
    '/api/log/%2e/token',
    '/x/%2E%2e%2Fapi/log/token',
    '/x\\..\\api/log/token',
    '/x/%5C..%5Capi/log/token',
    '/x/..;/api/log/token',
    '/./v1/models',
  ])('%s', (url) => {
    expect(parseTarget(url)).toBeNull();
    expect(invalidTargetReason(url)).toMatch(/'\.' or '\.\.' segment/);
  });

  it('keeps dots that are not whole segments', () => {
    expect(parseTarget('/v1beta/models/gemini-2.0-flash:generateContent')).not.toBeNull();
    expect(parseTarget('/v1/models/.hidden')).not.toBeNull();
    expect(parseTarget('/v1/files/a..b')).not.toBeNull();
    expect(parseTarget('/v1/chat/completions?next=/../x')).not.toBeNull(); // the query is no path
    expect(parseTarget('/x/%252e%252e/api')).toMatchObject({ path: '/x/%2e%2e/api' }); // decoded once: no dot segment
  });

  it('names the malformed escape when that is the fault', () => {
    expect(invalidTargetReason('/v1/%zz')).toMatch(/percent escape/);
  });
});

describe('the key= query where the relay reads it', () => {
  it('removes it under /v1/models/ too, where the relay would let it override the authenticated key', () => {
    expect(target('/v1/models/gemini:generateContent?key=other&alt=sse')).toMatchObject({ forwardUrl: '/v1/models/gemini:generateContent?alt=sse', queryKey: false });
  });

  it('on GET /v1/models, where it only chooses the Gemini answer format, records it so a key header can say the same', () => {
    expect(target('/v1/models?key=sk-abc')).toMatchObject({ forwardUrl: '/v1/models', queryKey: true });
    expect(target('/v1/models?key=')).toMatchObject({ forwardUrl: '/v1/models', queryKey: false });
    expect(target('/v1/models?limit=5')).toMatchObject({ forwardUrl: '/v1/models?limit=5', queryKey: false });
  });

  it('exposes the query as sent', () => {
    expect(target('/v1/realtime?model=vend-flash-free')).toMatchObject({ query: 'model=vend-flash-free' });
    expect(target('/v1/realtime')).toMatchObject({ query: '' });
  });
});
