/**
 * What a MySQL/MariaDB collation takes for plain ASCII: for each character of the planes a model
 * id could use (PLANES), the printable-ASCII text the collation weighs it as ('' when it ignores the
 * character), read from the server itself with WEIGHT_STRING. `scripts/model-fold-table.ts`
 * writes sluice's table of model-id foldings from it, and the collation test
 * (test/integration/model-fold-collations.test.ts) checks sluice's folding against it.
 */
import type { Connection } from 'mysql2/promise';

/** The utf8mb4 collations a relay's database is likely to use: the servers' defaults and their kin. */
export const CASE_INSENSITIVE_COLLATIONS = [
  'utf8mb4_general_ci', // MariaDB's default for utf8mb4 up to 11.4, MySQL 5.7's
  'utf8mb4_unicode_ci',
  'utf8mb4_unicode_520_ci',
  'utf8mb4_uca1400_ai_ci', // MariaDB 11.5+
  'utf8mb4_0900_ai_ci', // MySQL 8's default
] as const;

/** Those of CASE_INSENSITIVE_COLLATIONS that the server has (asked by using each: MariaDB lists some under shorter names). */
export async function availableCollations(c: Connection): Promise<string[]> {
  const have: string[] = [];
  for (const name of CASE_INSENSITIVE_COLLATIONS) {
    try {
      await c.query(`SELECT CAST('a' AS CHAR CHARACTER SET utf8mb4) COLLATE ${name}`);
      have.push(name);
    } catch {
      /* not on this server */
    }
  }
  return have;
}

/**
 * The planes read: the Basic Multilingual Plane, the Supplementary Multilingual Plane (enclosed
 * and squared letters such as 🅵 and 🆓, which uca1400_ai_ci weighs as ASCII, and historic
 * numerals), the Supplementary Ideographic Plane, and the tags and variation selectors of plane 14
 * (ignored).
 */
const PLANES = [0x00000, 0x10000, 0x20000, 0xe0000];

/** Every code point of the plane at `base`, built without a recursive CTE (MySQL and MariaDB name its bound differently). */
const plane = (base: number): string =>
  `SELECT ${base} + a.n + 16 * b.n + 256 * c.n + 4096 * d.n AS cp FROM ${[0, 1, 2, 3]
    .map((i) => `(${Array.from({ length: 16 }, (_, k) => `SELECT ${k} AS n`).join(' UNION ALL ')}) ${'abcd'[i]}`)
    .join(', ')}`;

/**
 * For every character of PLANES the collation weighs exactly as some printable-ASCII text: that text,
 * lower case ('' for a character it ignores). Characters weighed otherwise are left out.
 */
export async function asciiEquivalents(c: Connection, collation: string): Promise<Map<number, string>> {
  if (!/^utf8mb4_[a-z0-9_]+$/.test(collation)) throw new Error(`not a collation name: ${collation}`);
  const weight = (expr: string): string => `HEX(WEIGHT_STRING(${expr} COLLATE ${collation}))`;
  // The weight of each printable ASCII character, one unit (4 hex digits) or more.
  const units = new Map<string, string>();
  const ascii = Array.from({ length: 95 }, (_, i) => String.fromCharCode(0x7e - i)); // lower case last: it wins
  for (const ch of ascii) {
    const [r] = await c.query(`SELECT ${weight('CAST(? AS CHAR CHARACTER SET utf8mb4)')} AS w`, [ch]);
    const w = (r as Array<{ w: string }>)[0]!.w;
    if (w !== '') units.set(w, ch.toLowerCase());
  }
  const longest = Math.max(...[...units.keys()].map((w) => w.length));
  const out = new Map<number, string>();
  for (const base of PLANES) {
    const [rows] = await c.query(`SELECT cp, ${weight('CONVERT(CHAR(cp USING utf32) USING utf8mb4)')} AS w FROM (${plane(base)}) n WHERE cp < 55296 OR cp > 57343`);
    readPlane(rows as Array<{ cp: number; w: string }>, units, longest, out);
  }
  return out;
}

/** Each row's weight read back as ASCII text, where it is made of ASCII weights only. */
function readPlane(rows: ReadonlyArray<{ cp: number; w: string | null }>, units: ReadonlyMap<string, string>, longest: number, out: Map<number, string>): void {
  for (const { cp, w } of rows) {
    if (w === null) continue;
    let text = '';
    let at = 0;
    while (at < w.length) {
      let len = Math.min(longest, w.length - at);
      while (len > 0 && !units.has(w.slice(at, at + len))) len -= 4;
      if (len <= 0) break;
      text += units.get(w.slice(at, at + len))!;
      at += len;
    }
    if (at === w.length) out.set(cp, text);
  }
}
