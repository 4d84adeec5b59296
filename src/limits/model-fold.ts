/**
 * Which model ids the relay may take for a free model. new-api picks a channel with
 * `WHERE model = ?` when its memory cache is off, and on MySQL/MariaDB that comparison is made by
 * the column's collation: under the usual case-insensitive ones `vend-flash-FREE`,
 * `vend-flash-free ` (PAD SPACE: trailing spaces ignored), `vend-flaßh-free` (general_ci weighs ß
 * as s) and `vend-flash-ｆｒｅｅ` (the Unicode collations ignore width) are all `vend-flash-free`.
 * So the free rule is applied to a model id's *folded* forms, one per family of collations; a
 * call is free when either says so. Folding more than a given relay does only counts a call the
 * relay would not route to a free model (it costs the client one free-tier call, nothing more);
 * folding less would let free calls through uncounted.
 *
 * The fold (docs/limits.md says it for operators):
 * 1. characters the collation weighs as other letters are replaced by them (the tables, read from
 *    MariaDB by scripts/model-fold-table.ts: general_ci's ß → s; the Unicode collations' æ → ae,
 *    ł → l, ❶ → 1, combining Latin letters, ...);
 * 2. compatibility decomposition (NFKD: full width, ligatures, super- and subscripts), then case
 *    folded (upper, then lower case: ß → ss), then decomposed again;
 * 3. dropped: combining marks (accents), format characters and other default-ignorable code
 *    points (zero-width joiners, soft hyphens), control characters but tab, CR, LF, VT, FF and NEL;
 * 4. a decimal digit of any script is its ASCII digit;
 * 5. trailing spaces (U+0020, which NBSP and the ideographic space have become) are dropped.
 */
import { GENERAL_CI_LETTERS, UNICODE_LETTERS } from './model-fold-table.js';

/** Step 3's characters. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the C0 and C1 controls are among the characters the collations ignore
const IGNORED = /[\p{M}\p{Cf}\p{Default_Ignorable_Code_Point}\u0000-\u0008\u000e-\u001f\u007f-\u0084\u0086-\u009f]/gu;
const DIGITS = /\p{Nd}/gu;
const DIGIT = /\p{Nd}/u;
/** An id of printable ASCII (nearly every id): its fold is its lower case, the same in every reading. */
const PLAIN = /^[\x20-\x7e]*$/;

/**
 * Ids longer than this (UTF-16 units) that are not plain ASCII are counted as free without being
 * folded. The relay's `abilities.model` is a varchar(255), so a longer id can only match a free
 * one through padding (ignored characters, trailing spaces); and folding non-ASCII text is slow
 * per character, which a request must not be able to buy in bulk.
 */
export const MAX_FOLDED_LENGTH = 512;

/** Digit values already worked out (there are some 700 decimal digits). */
const digitValues = new Map<string, string>();

/** A decimal digit's value: Unicode lays out every script's digits as a run of ten, 0 to 9 (some runs follow each other). */
function digitValue(d: string): string {
  if (d <= '9') return d;
  let v = digitValues.get(d);
  if (v === undefined) {
    let cp = d.codePointAt(0)!;
    let steps = 0;
    while (DIGIT.test(String.fromCodePoint(cp - 1))) {
      cp--;
      steps++;
    }
    digitValues.set(d, (v = String(steps % 10)));
  }
  return v;
}

/** `text` without its trailing spaces (a loop: a regex anchored at the end would rescan every run of spaces). */
function trimSpacesEnd(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x20) end--;
  return end === text.length ? text : text.slice(0, end);
}

/** A table of step 1, as a replacer. */
export interface Letters {
  readonly pattern: RegExp;
  readonly map: ReadonlyMap<string, string>;
}

export function letters(pairs: ReadonlyArray<readonly [number, string]>): Letters {
  const map = new Map(pairs.map(([cp, s]) => [String.fromCodePoint(cp), s]));
  const escaped = [...map.keys()].map((c) => `\\u{${c.codePointAt(0)!.toString(16)}}`).join('');
  return { pattern: new RegExp(map.size ? `[${escaped}]` : '(?!)', 'gu'), map };
}

/** general_ci's reading, then the Unicode collations'. */
const READINGS: readonly Letters[] = [letters(GENERAL_CI_LETTERS), letters(UNICODE_LETTERS)];

/** `text` folded with the letters of one reading (steps 1-5). Linear in its length: callers bound it. */
export function foldWith(text: string, table: Letters): string {
  if (PLAIN.test(text)) return trimSpacesEnd(text).toLowerCase();
  return trimSpacesEnd(
    text
      .replace(table.pattern, (c) => table.map.get(c)!)
      .normalize('NFKD')
      .toUpperCase()
      .toLowerCase()
      // Lower-casing picks σ or ς by position; a collation weighs them alike.
      .replace(/ς/g, 'σ')
      .normalize('NFKD')
      .replace(IGNORED, '')
      .replace(DIGITS, digitValue),
  );
}

/** The forms of `model` a relay's database may compare, one per reading (in READINGS' order). */
export function modelFolds(model: string): string[] {
  const first = foldWith(model, READINGS[0]!);
  return PLAIN.test(model) ? READINGS.map(() => first) : [first, ...READINGS.slice(1).map((r) => foldWith(model, r))];
}

/**
 * new-api routes a `/v1/responses/compact` call on `<model>-openai-compact` (`WithCompactModelSuffix`,
 * which leaves an id that already ends so alone), the channel entry of the model's compact variant.
 * A client may name that id itself, on that route or another: it is judged as its base too.
 */
const COMPACT_SUFFIX = '-openai-compact';

/**
 * The free rule, applied as the relay's database compares: `model` is free when, in one reading,
 * its fold ends with the suffix's fold (`freeTier.modelSuffix`), or equals the fold of an id of
 * the list (`freeTier.models`); and when it is longer than MAX_FOLDED_LENGTH and not plain ASCII.
 * The compact variant of a free id (COMPACT_SUFFIX) is free as well.
 * A plain ASCII id is judged by its end (suffix rule) or only when no longer than the longest id
 * (list), so that no id costs more than its trailing spaces to judge.
 */
export function freeModelRule(rule: { modelSuffix: string; models: readonly string[] | null }): (model: string) => boolean {
  const { models } = rule;
  const ids = READINGS.map((r) => new Set((models ?? []).map((m) => foldWith(m, r))));
  const longest = Math.max(0, ...ids.flatMap((set) => [...set].map((f) => f.length)));
  const suffixes = READINGS.map((r) => foldWith(rule.modelSuffix, r));
  const plainFree = (id: string): boolean => {
    if (models !== null) return id.length <= longest && ids.some((set) => set.has(id.toLowerCase()));
    return suffixes.some((s) => id.length >= s.length && id.slice(id.length - s.length).toLowerCase() === s);
  };
  const plainIsFree = (model: string): boolean => {
    const id = trimSpacesEnd(model);
    if (plainFree(id)) return true;
    const base = id.length - COMPACT_SUFFIX.length;
    return base > 0 && id.slice(base).toLowerCase() === COMPACT_SUFFIX && plainFree(id.slice(0, base));
  };
  // One fold per reading, of the suffix as of the id (the suffix is plain ASCII: the same in each).
  const compact = foldWith(COMPACT_SUFFIX, READINGS[0]!);
  const foldIsFree = (f: string, i: number): boolean => (models !== null ? ids[i]!.has(f) : f.endsWith(suffixes[i]!));
  return (model) => {
    if (PLAIN.test(model)) return plainIsFree(model);
    if (model.length > MAX_FOLDED_LENGTH) return true;
    return modelFolds(model).some((f, i) => foldIsFree(f, i) || (f.length > compact.length && f.endsWith(compact) && foldIsFree(f.slice(0, -compact.length), i)));
  };
}
