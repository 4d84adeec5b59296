import { describe, expect, it } from 'vitest';
import { modelFromPath } from './path.js';

describe('modelFromPath', () => {
  it.each([
    ['/v1beta/models/gemini-2.0-flash:generateContent', 'gemini-2.0-flash'],
    ['/v1beta/models/gemini-2.0-flash:streamGenerateContent', 'gemini-2.0-flash'],
    ['/v1beta/models/gemini-2.0-flash:countTokens', 'gemini-2.0-flash'],
    ['/v1beta/models/text-embedding-004:embedContent', 'text-embedding-004'],
    ['/v1beta/models/text-embedding-004:batchEmbedContents', 'text-embedding-004'],
    ['/v1/models/gemini-1.5-pro:generateContent', 'gemini-1.5-pro'],
    ['/v1/models/gemini-1.5-pro:streamGenerateContent', 'gemini-1.5-pro'],
    ['/v1/engines/text-embedding-ada-002/embeddings', 'text-embedding-ada-002'],
    // A POST to `/v1/models/{id}` without an action is routed by the relay as a Gemini call for `{id}`.
    ['/v1/models/gpt-4o', 'gpt-4o'],
    ['/v1/models/vend-flash-free', 'vend-flash-free'],
  ])('reads the model from %s', (path, model) => {
    expect(modelFromPath(path)).toBe(model);
  });

  it('reads the model from a Gemini path without an action (model info)', () => {
    expect(modelFromPath('/v1beta/models/gemini-2.0-flash')).toBe('gemini-2.0-flash');
  });

  it('keeps everything up to the first colon, as the relay does', () => {
    expect(modelFromPath('/v1beta/models/gemini-2.0-flash:generateContent:extra')).toBe('gemini-2.0-flash');
    expect(modelFromPath('/v1beta/models/tuned/x:generateContent')).toBe('tuned/x');
  });

  it.each([
    '/v1beta/models',
    '/v1beta/models/',
    '/v1beta/models/:generateContent',
    '/v1/models',
    '/v1/models/',
    '/v1/models/:generateContent',
    '/v1/engines',
    '/v1/engines/',
    '/v1/engines/davinci',
    '/v1/engines/davinci/completions',
    '/v1/engines/a/b/embeddings',
    '/v1/engines//embeddings',
    '/v1/chat/completions',
    '/v1/embeddings',
    '/v1/messages',
    '/',
    '',
    '/v1beta/modelsx/gemini:generateContent',
    '/V1BETA/MODELS/gemini:generateContent',
    '/api/v1beta/models/gemini:generateContent',
  ])('returns undefined for %j', (path) => {
    expect(modelFromPath(path)).toBeUndefined();
  });

  describe('takes the path as parseTarget decoded it (percent-encoding is tested in src/routing/target.test.ts)', () => {
    it('does not decode again: a % left in the decoded path is part of the model', () => {
      expect(modelFromPath('/v1beta/models/a%25b:generateContent')).toBe('a%25b');
      expect(modelFromPath('/v1beta/models/vend-flash-fre%65:generateContent')).toBe('vend-flash-fre%65');
      expect(modelFromPath('/v1/engines/vend-flash-fre%65/embeddings')).toBe('vend-flash-fre%65');
    });

    it('does not split on an escaped colon or slash that is still escaped', () => {
      expect(modelFromPath('/v1beta/models/vend-flash-free%3AgenerateContent')).toBe('vend-flash-free%3AgenerateContent');
      expect(modelFromPath('/v1/models/vend-flash-free%3AgenerateContent')).toBe('vend-flash-free%3AgenerateContent');
      expect(modelFromPath('/v1/engines/a%2Fb/embeddings')).toBe('a%2Fb');
      expect(modelFromPath('/v1beta%2Fmodels/gemini:generateContent')).toBeUndefined();
    });

    it('reads a % that is not an escape as it is, without throwing', () => {
      expect(modelFromPath('/v1beta/models/vend%zzfree:generateContent')).toBe('vend%zzfree');
      expect(modelFromPath('/v1beta/models/free%')).toBe('free%');
    });

    it('reads decoded non-ASCII characters as they are', () => {
      expect(modelFromPath('/v1beta/models/modèle:generateContent')).toBe('modèle');
      expect(modelFromPath('/v1beta/models/gemini\uFFFD:generateContent')).toBe('gemini\uFFFD');
      expect(modelFromPath('/v1beta/models/a+b:generateContent')).toBe('a+b');
    });
  });
});
