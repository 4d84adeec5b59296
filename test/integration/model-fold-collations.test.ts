/**
 * sluice's model-id fold (src/limits/model-fold.ts) against the collations of the real MariaDB:
 * every character of the Basic Multilingual Plane that a case-insensitive collation weighs as
 * printable-ASCII text (or ignores) must fold to that text in the collation's reading. So no
 * character a relay on this server could take for part of an ASCII free id escapes the free rule.
 * When the server adds or changes equivalences this fails; `npm run gen:model-fold` rewrites the
 * table from the server.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlAdmin } from '../support/relay-db.js';
import { asciiEquivalents, availableCollations } from '../../scripts/collations.js';
import { foldWith, letters } from '../../src/limits/model-fold.js';
import { GENERAL_CI_LETTERS, UNICODE_LETTERS } from '../../src/limits/model-fold-table.js';

let db: mysql.Connection;

beforeAll(async () => {
  db = await mysqlAdmin({ charset: 'utf8mb4' });
});
afterAll(() => db?.end());

describe('the model-id fold covers what the server’s collations equate with ASCII', () => {
  it('has general_ci and at least one Unicode collation to compare with', async () => {
    const have = await availableCollations(db);
    expect(have).toContain('utf8mb4_general_ci');
    expect(have.length).toBeGreaterThan(1);
  });

  it('folds every such character of each collation to its ASCII text', async () => {
    const misses: string[] = [];
    let checked = 0;
    for (const collation of await availableCollations(db)) {
      const table = letters(collation === 'utf8mb4_general_ci' ? GENERAL_CI_LETTERS : UNICODE_LETTERS);
      for (const [cp, text] of await asciiEquivalents(db, collation)) {
        checked++;
        const ch = String.fromCodePoint(cp);
        // Between letters, so that a character weighed as a space is not dropped as a trailing one.
        if (foldWith(`x${ch}x`, table) !== foldWith(`x${text}x`, table)) misses.push(`${collation}: U+${cp.toString(16)} is ${JSON.stringify(text)}`);
      }
    }
    expect(misses).toEqual([]);
    // ASCII itself, accented Latin, full width, ignorables...: thousands in all.
    expect(checked).toBeGreaterThan(2000);
  }, 60_000);
});
