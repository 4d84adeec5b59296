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
    ['/v1/engines/davinci/completions', 'davinci'],
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
    '/v1/models/gpt-4o',
    '/v1/models/vend-flash-free',
    '/v1/models/:generateContent',
    '/v1/engines',
    '/v1/engines/',
    '/v1/engines/davinci',
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

  describe('percent-encoding', () => {
    it('decodes the model id', () => {
      expect(modelFromPath('/v1beta/models/vend-flash-fre%65:generateContent')).toBe('vend-flash-free');
      expect(modelFromPath('/v1beta/models/%76%65%6E%64-flash-free:generateContent')).toBe('vend-flash-free');
      expect(modelFromPath('/v1/models/vend-flash-fre%65:generateContent')).toBe('vend-flash-free');
      expect(modelFromPath('/v1/engines/vend-flash-fre%65/embeddings')).toBe('vend-flash-free');
      expect(modelFromPath('/v1beta/models/vend-flash-fre%65')).toBe('vend-flash-free');
    });

    it('decodes multi-byte UTF-8', () => {
      expect(modelFromPath('/v1beta/models/mod%C3%A8le:generateContent')).toBe('modèle');
    });

    it('leaves + alone, as path decoding does', () => {
      expect(modelFromPath('/v1beta/models/a+b:generateContent')).toBe('a+b');
    });

    it('splits on an encoded colon, because the relay decodes the path before splitting', () => {
      expect(modelFromPath('/v1beta/models/vend-flash-free%3AgenerateContent')).toBe('vend-flash-free');
      expect(modelFromPath('/v1beta/models/vend-flash-free%3agenerateContent')).toBe('vend-flash-free');
      expect(modelFromPath('/v1/models/vend-flash-free%3AgenerateContent')).toBe('vend-flash-free');
    });

    it('matches an encoded prefix and encoded slashes, as the relay routes on the decoded path', () => {
      expect(modelFromPath('/v1beta%2Fmodels/gemini:generateContent')).toBe('gemini');
      expect(modelFromPath('/v1beta/models%2Fgemini:generateContent')).toBe('gemini');
      expect(modelFromPath('/v1/engines/a%2Fb/embeddings')).toBe('a');
    });

    it.each([
      ['/v1beta/models/vend%zzfree:generateContent', 'vend%zzfree'],
      ['/v1beta/models/vend%:generateContent', 'vend%'],
      ['/v1beta/models/vend%6:generateContent', 'vend%6'],
      ['/v1/models/%:generateContent', '%'],
      ['/v1/engines/%g0/embeddings', '%g0'],
      ['/v1beta/models/free%', 'free%'],
    ])('returns the raw segment of %s when it is malformed', (path, model) => {
      expect(modelFromPath(path)).toBe(model);
    });

    it('still decodes the model when only another part of the path is malformed', () => {
      expect(modelFromPath('/v1beta/models/vend-flash-fre%65:generate%zz')).toBe('vend-flash-free');
      expect(modelFromPath('/v1/engines/vend-flash-fre%65/embed%dings')).toBe('vend-flash-free');
    });

    it('does not throw on encoded bytes that are not UTF-8', () => {
      expect(modelFromPath('/v1beta/models/gemini%FF:generateContent')).toBe('gemini\uFFFD');
    });
  });
});
