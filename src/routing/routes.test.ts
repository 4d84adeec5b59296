import { describe, expect, it } from 'vitest';
import { planFor, routeOf, wildcardPlan } from './routes.js';

const post = (path: string) => planFor(routeOf(path), 'POST');
const get = (path: string) => planFor(routeOf(path), 'GET');

describe('routeOf: where the relay reads a model (new-api router/*.go behind its distributor)', () => {
  it.each([
    '/v1/chat/completions',
    '/v1/completions',
    '/v1/messages',
    '/v1/responses',
    '/v1/responses/compact',
    '/v1/alpha/search',
    '/v1/edits',
    '/v1/embeddings',
    '/v1/rerank',
    '/v1/images/variations',
    '/v1/files',
    '/v1/fine-tunes',
  ])('POST %s: the generic read (JSON or urlencoded by Content-Type)', (path) => {
    expect(post(path)).toEqual({ kind: 'body', first: true, second: 'none', fallback: null, engineParam: false });
  });

  it.each([
    ['/v1/images/generations', 'dall-e'],
    ['/v1/moderations', 'text-moderation-stable'],
    ['/v1/audio/speech', 'tts-1'],
  ])('POST %s: the generic read, with the model the relay falls back on (%s)', (path, fallback) => {
    expect(post(path)).toMatchObject({ kind: 'body', first: true, second: 'none', fallback });
  });

  it('audio uploads and image edits read the body again, multipart included', () => {
    expect(post('/v1/audio/transcriptions')).toMatchObject({ kind: 'body', first: false, second: 'lenient', fallback: 'whisper-1' });
    expect(post('/v1/audio/translations')).toMatchObject({ kind: 'body', first: true, second: 'lenient', fallback: 'whisper-1' });
    expect(post('/v1/images/edits')).toMatchObject({ kind: 'body', first: true, second: 'lenient-form' });
  });

  it('the playground (/pg/chat/completions) reads the body like a chat call, then again with multipart', () => {
    expect(post('/pg/chat/completions')).toMatchObject({ kind: 'body', first: true, second: 'strict' });
    expect(routeOf('/pg/chat/completions').family).toBe('playground');
  });

  it('video tasks read the body by Content-Type, multipart included; their fetches and remixes read nothing', () => {
    expect(post('/v1/videos')).toMatchObject({ kind: 'body', first: false, second: 'strict' });
    expect(post('/v1/video/generations')).toMatchObject({ kind: 'body', first: false, second: 'strict' });
    expect(post('/v1/videos/task_1/remix').kind).toBe('none');
    expect(get('/v1/videos/task_1').kind).toBe('none');
    expect(get('/v1/video/generations/task_1').kind).toBe('none');
  });

  it('the task platforms: Kling, Jimeng, Suno, Midjourney under /mj and /{mode}/mj', () => {
    expect(post('/kling/v1/videos/text2video').kind).toBe('kling');
    expect(post('/kling/v1/videos/image2video').kind).toBe('kling');
    expect(post('/jimeng/').kind).toBe('jimeng');
    expect(post('/suno/submit/music').kind).toBe('suno');
    expect(post('/mj/submit/imagine').kind).toBe('mj');
    expect(post('/fast/mj/submit/imagine').kind).toBe('mj');
    expect(post('/v1/mj/submit/imagine').kind).toBe('mj'); // gin's /:mode/mj group takes any first segment
    expect(post('//mj/submit/imagine').kind).toBe('mj'); // an empty one too (`/%2Fmj/...`)
    for (const p of ['/kling/v1/videos/text2video', '/jimeng/', '/suno/submit/music', '/mj/submit/imagine']) expect(routeOf(p).family).toBe('tasks');
  });

  it('realtime reads ?model= on its GET', () => {
    expect(get('/v1/realtime').kind).toBe('query');
    expect(post('/v1/realtime').kind).toBe('none'); // no such route: the relay's 404
    expect(routeOf('/v1/realtime').unrouted).toBe(true);
  });

  it('Gemini paths name the model, on POST only (GET /v1/models/{id} retrieves a model, no distributor)', () => {
    expect(post('/v1beta/models/gemini-2.0-flash:generateContent').kind).toBe('path');
    expect(post('/v1/models/gemini-2.0-flash:generateContent').kind).toBe('path');
    expect(get('/v1beta/models/gemini-2.0-flash').kind).toBe('none');
    expect(get('/v1/models/gpt-4o').kind).toBe('none');
    expect(get('/v1/models').kind).toBe('none');
  });

  it('/v1/engines/{model}/embeddings reads the body, then the path', () => {
    expect(post('/v1/engines/text-embedding-3-small/embeddings')).toMatchObject({ kind: 'body', first: true, engineParam: true });
    expect(post('/v1/engines/a/b/embeddings').kind).toBe('none'); // gin's `:model` is one segment
  });

  it('reads no model on a POST the relay has no route for (gin answers 404, or 307 to drop a trailing slash, before any middleware)', () => {
    for (const p of [
      '/v1/chat/completions/',
      '/v1/some/new/route',
      '/v1/messages/count_tokens',
      '/v1/responses/input_tokens',
      '/v1/realtime/sessions',
      '/v1/fine-tunes/a/b/cancel',
      '/v1/models',
    ]) {
      expect(post(p).kind, p).toBe('none');
      expect(routeOf(p).unrouted, p).toBe(true);
    }
    // gin's `/fine-tunes/:id/cancel` reads the model, then answers that it is not implemented.
    expect(post('/v1/fine-tunes/ft-1/cancel')).toMatchObject({ kind: 'body', first: true });
    expect(post('/v1/fine-tunes//cancel')).toMatchObject({ kind: 'body', first: true }); // an empty `:id` matches too
    expect(routeOf('/v1/fine-tunes/ft-1/cancel').unrouted).toBe(false);
    expect(routeOf('/v1/chat/completions').unrouted).toBe(false);
    expect(post('/api/user/login').kind).toBe('none');
    expect(post('/v1/dashboard/billing/usage').kind).toBe('none');
    expect(post('/pg/other').kind).toBe('none');
    expect(post('/').kind).toBe('none');
    expect(planFor(routeOf('/v1/chat/completions'), 'PUT').kind).toBe('none');
    expect(planFor(routeOf('/v1/chat/completions'), 'OPTIONS').kind).toBe('none');
  });
});

describe('wildcardPlan: the distributor tests a Gemini path for the task markers first', () => {
  it.each([
    ['/v1beta/models/gemini:generateContent', 'path'],
    ['/v1beta/models/x/mj/submit/imagine', 'mj'],
    ['/v1beta/models/x/suno/submit/y', 'suno'],
    ['/v1beta/models/x/v1/videos', 'body'],
    ['/v1/models/x/v1/video/generations:generateContent', 'body'],
    ['/v1beta/models/x/v1/videos/y/remix', 'none'],
  ])('%s → %s', (path, kind) => {
    expect(wildcardPlan(path).kind).toBe(kind);
  });
});

describe('routeOf: families, key headers and CORS', () => {
  it.each([
    ['/v1/chat/completions', 'chat'],
    ['/v1/chat/completions/x', 'chat'],
    ['/v1/responses', 'responses'],
    ['/v1/messages', 'messages'],
    ['/v1beta/models/gemini:generateContent', 'gemini'],
    ['/v1beta/models', 'gemini'],
    ['/v1/models', 'models'],
    ['/v1/models/gpt-4o', 'models'],
    ['/api/log/token', 'usage_query'],
    ['/api/usage/token/', 'usage_query'],
    ['/api/user/self', 'api'],
    ['/v1/dashboard/billing/usage', 'dashboard'],
    ['/v1/embeddings', 'v1_other'],
    ['/pg/chat/completions', 'playground'],
    ['/mj/submit/imagine', 'tasks'],
    ['/healthz', 'other'],
  ])('%s is in family %s', (path, family) => {
    expect(routeOf(path).family).toBe(family);
  });

  it('x-api-key counts under /v1/messages and /v1/models, x-goog-api-key under /v1beta/models (contract §5)', () => {
    expect(routeOf('/v1/messages')).toMatchObject({ xApiKey: true, xGoogApiKey: false });
    expect(routeOf('/v1/messages/count_tokens')).toMatchObject({ xApiKey: true });
    expect(routeOf('/v1/models')).toMatchObject({ xApiKey: true, xGoogApiKey: false });
    expect(routeOf('/v1/models/gemini:generateContent')).toMatchObject({ xApiKey: true, xGoogApiKey: false });
    expect(routeOf('/v1beta/models/gemini:generateContent')).toMatchObject({ xApiKey: false, xGoogApiKey: true });
    expect(routeOf('/v1beta/models')).toMatchObject({ xGoogApiKey: true });
    for (const p of ['/v1/chat/completions', '/v1/responses', '/v1/messagesx', '/api/log/token', '/pg/chat/completions', '/mj/submit/imagine']) {
      expect(routeOf(p)).toMatchObject({ xApiKey: false, xGoogApiKey: false });
    }
  });

  it('the relay answers with CORS headers everywhere but its dashboard /api/* routes, save the two usage queries', () => {
    for (const p of [
      '/v1/chat/completions',
      '/v1beta/models/x:generateContent',
      '/pg/chat/completions',
      '/v1/dashboard/billing/usage',
      '/api/log/token',
      '/api/usage/token/',
      '/nowhere',
    ]) {
      expect(routeOf(p).cors).toBe(true);
    }
    for (const p of ['/api/user/self', '/api/status', '/api/log/self']) expect(routeOf(p).cors).toBe(false);
  });

  it('answers with shared routes: classifying allocates nothing per request', () => {
    expect(routeOf('/v1beta/models/a:generateContent')).toBe(routeOf('/v1beta/models/b:streamGenerateContent'));
    expect(routeOf('/v1/chat/completions')).toBe(routeOf('/v1/chat/completions'));
  });
});
