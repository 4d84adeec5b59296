import { describe, expect, it } from 'vitest';
import { freeModelRule, MAX_FOLDED_LENGTH, modelFolds } from './model-fold.js';

const bySuffix = freeModelRule({ modelSuffix: '-free', models: null });
const listed = freeModelRule({ modelSuffix: '-free', models: ['vend-flash-free', 'vend-5.3-flash-free'] });

describe('modelFolds', () => {
  it.each([
    ['vend-flash-free', ['vend-flash-free']],
    ['vend-flash-FREE', ['vend-flash-free']],
    ['vend-flash-free   ', ['vend-flash-free']],
    ['vend-flash-free\u00a0\u3000', ['vend-flash-free']],
    ['vend-flaßh-free', ['vend-flash-free', 'vend-flassh-free']], // general_ci: ß = s; the Unicode collations: ß = ss
    ['vend-flash-ＦＲＥＥ', ['vend-flash-free']],
    ['vend-flash-frée', ['vend-flash-free']],
    ['vend-flash-fr\u200dee\u00ad', ['vend-flash-free']],
    ['vend-v\u0664-flash-free', ['vend-v4-flash-free']],
    ['ΒΑΣ', ['βασ']], // final sigma, as any sigma
    ['Ωmega-free', ['ωmega-free']],
    ['vend-flash-free\t', ['vend-flash-free\t']],
    [' vend-flash-free', [' vend-flash-free']],
  ])('%j folds to %j', (model, folds) => {
    expect([...new Set(modelFolds(model))]).toEqual(folds);
  });
});

describe('freeModelRule', () => {
  it('takes the spellings the relay database would take for a free id, under either rule', () => {
    for (const m of ['vend-flash-FREE', 'vend-flash-free ', 'VEND-5.3-FLASH-FREE', 'vend-flaßh-free', 'vend-flash-frée', 'vend-flash-ｆｒｅｅ']) {
      expect([m, bySuffix(m), listed(m)]).toEqual([m, true, true]);
    }
  });

  it('keeps what a collation does not ignore: tabs, leading spaces, other hyphens', () => {
    for (const m of ['vend-flash-free\t', 'vend-flash-free\n', 'vend-flash-fre', 'vend-flash', 'vend-flash-free-2']) {
      expect([m, bySuffix(m), listed(m)]).toEqual([m, false, false]);
    }
    // The suffix rule is about the end: these end in -free; the list knows no such id.
    for (const m of [' vend-flash-free', 'vend\u2010flash-free']) expect([m, bySuffix(m), listed(m)]).toEqual([m, true, false]);
  });

  it("takes a free id's compact variant, the id new-api routes /v1/responses/compact on (-openai-compact), as the relay's database would", () => {
    for (const m of [
      'vend-flash-free-openai-compact',
      'vend-flash-free-OpenAI-Compact',
      'VEND-FLASH-FREE-openai-compact  ',
      'vend-flash-frée-openai-compact',
      'vend-flash-free-openai-ćompact',
    ]) {
      expect([m, bySuffix(m), listed(m)]).toEqual([m, true, true]);
    }
    // Not the compact variant of a free id.
    for (const m of ['vend-flash-openai-compact', '-openai-compact', 'vend-flash-free -openai-compact', 'vend-flash-free-openai-compact-2', 'vend-flash-freeopenai-compact']) {
      expect([m, bySuffix(m), listed(m)]).toEqual([m, false, false]);
    }
  });

  it('folds the rule as well as the id: a list id or suffix in capitals or full width', () => {
    expect(freeModelRule({ modelSuffix: '-FREE', models: null })('vend-flash-free')).toBe(true);
    expect(freeModelRule({ modelSuffix: '-free', models: ['Vend-Flash-ＦＲＥＥ'] })('vend-flash-free')).toBe(true);
  });

  it('counts as free an id past MAX_FOLDED_LENGTH that is not plain ASCII, without folding it', () => {
    const long = 'x'.repeat(MAX_FOLDED_LENGTH) + 'é';
    expect(bySuffix(long)).toBe(true);
    expect(bySuffix('é'.repeat(MAX_FOLDED_LENGTH))).toBe(false);
    // Plain ASCII of any length is judged exactly.
    expect(bySuffix('x'.repeat(100_000))).toBe(false);
    expect(bySuffix('x'.repeat(100_000) + '-FREE' + ' '.repeat(100_000))).toBe(true);
    expect(listed('vend-flash-free' + ' '.repeat(100_000))).toBe(true);
  });

  it('takes time bounded by the id, never quadratic (spaces before a last character, long non-ASCII)', () => {
    const start = performance.now();
    for (const m of [' '.repeat(500_000) + 'x', 'x' + ' '.repeat(500_000), 'é'.repeat(500_000), ' '.repeat(500_000) + 'é', '\u200d'.repeat(MAX_FOLDED_LENGTH)]) {
      bySuffix(m);
      listed(m);
    }
    // Linear work on these is a few milliseconds; a quadratic scan of 500,000 spaces takes minutes.
    expect(performance.now() - start).toBeLessThan(2_000);
  });

  it('judges plain ASCII ids by their end exactly as by their whole fold', () => {
    let seed = 5;
    const rand = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const pieces = ['-free', '-FREE', '-Free', ' ', 'vend', '-flash', 'x', '-fre', 'e', '5.3'];
    for (let i = 0; i < 3000; i++) {
      const m = Array.from({ length: 1 + rand(5) }, () => pieces[rand(pieces.length)]).join('');
      const fold = m.toLowerCase().replace(/ +$/, '');
      expect([m, bySuffix(m)]).toEqual([m, fold.endsWith('-free')]);
      expect([m, listed(m)]).toEqual([m, fold === 'vend-flash-free' || fold === 'vend-5.3-flash-free']);
    }
  });
});
