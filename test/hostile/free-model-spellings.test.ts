/**
 * Free models spelt as the relay's database would still take them (issue 25, item 8; letters
 * beyond the Basic Multilingual Plane from a probe in issue 28). new-api
 * picks a channel with `WHERE model = ?` (its memory cache off), and on MySQL/MariaDB the column's
 * collation compares: `vend-flash-FREE` and `vend-flash-free ` are `vend-flash-free` there. Each
 * spelling is first put to a real MariaDB, in a table like new-api's `abilities` under each
 * case-insensitive collation the server has; every spelling one of them routes to a free model
 * must be counted by a running sluice, under the suffix rule and under an explicit list of ids; and
 * under the list, the spellings none routes must not be.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { mysqlAdmin } from '../support/relay-db.js';
import { availableCollations } from '../../scripts/collations.js';
import { useHarness } from '../support/harness.js';
import { freshUser, usedToday } from '../support/helpers.js';
import { request } from '../support/http.js';

const FREE_IDS = ['vend-flash-free', 'vend-v4-flash-free', 'vend-5.3-flash-free'];
const PAID_IDS = ['vend-flash', 'vend-v4-flash', 'vend-5.3-flash'];

/** Spellings a client may send; what the database makes of each is asked, not assumed. */
const SPELLINGS = [
  'vend-flash-FREE', // the two
  'vend-flash-free ',
  'vend-flash-free     ',
  'VEND-V4-FLASH-FREE',
  'Vend-5.3-Flash-Free ',
  'vend-flaßh-free', // general_ci: ß is s
  'vend-flash-frée', // accents
  'vend-flash-ＦＲＥＥ', // full width
  'vend-flash-fr\u200dee', // a zero-width joiner
  'vend-flash-free\u0000',
  'vend-flash-free\u00a0', // a trailing no-break space
  'vend-v\u0664-flash-free', // an Arabic-Indic 4
  'vend-flash-fr\u0364e', // a combining small e
  'vend-fla\u017fh-free', // long s
  'vend-flash-\u{1f193}', // 🆓, the squared word FREE (uca1400_ai_ci)
  'vend-flash-\u{1f175}\u{1f181}\u{1f174}\u{1f174}', // 🅵🆁🅴🅴, negative squared letters (uca1400_ai_ci)
  'vend-flash-fre\u{1f154}', // 🅔, a circled letter (uca1400_ai_ci)
  // Spellings no collation takes for a free id: not counted, unless they end in -free as sent.
  'vend-flash-free\t',
  ' vend-flash-free',
  'vend-flash-fre',
  'vend\u2010flash-free', // a hyphen that is not a hyphen-minus
];

interface Verdict {
  spelling: string;
  /** The collations under which `WHERE model = ?` finds a free id. */
  routedFreeBy: string[];
}

let db: mysql.Connection;
let database: string;
let collations: string[] = [];
const verdicts: Verdict[] = [];

beforeAll(async () => {
  db = await mysqlAdmin({ charset: 'utf8mb4' });
  database = `${inject('dbPrefix')}${process.pid}_spellings`;
  await db.query(`CREATE DATABASE \`${database}\` DEFAULT CHARACTER SET utf8mb4`);
  collations = await availableCollations(db);
  for (const [i, collation] of collations.entries()) {
    // new-api's abilities table (model/ability.go), the model column under this collation.
    await db.query(
      `CREATE TABLE \`${database}\`.abilities_${i} (\`group\` varchar(64) NOT NULL, model varchar(255) COLLATE ${collation} NOT NULL, channel_id int NOT NULL, enabled tinyint(1), PRIMARY KEY (\`group\`, model, channel_id))`,
    );
    for (const [n, id] of [...FREE_IDS, ...PAID_IDS].entries()) await db.query(`INSERT INTO \`${database}\`.abilities_${i} VALUES ('default', ?, ?, 1)`, [id, n + 1]);
  }
  for (const spelling of SPELLINGS) {
    const routedFreeBy: string[] = [];
    for (const [i, collation] of collations.entries()) {
      const [rows] = await db.query(`SELECT model FROM \`${database}\`.abilities_${i} WHERE \`group\` = 'default' AND model = ? AND enabled = 1`, [spelling]);
      if ((rows as Array<{ model: string }>).some((r) => FREE_IDS.includes(r.model))) routedFreeBy.push(collation);
    }
    verdicts.push({ spelling, routedFreeBy });
  }
});

afterAll(async () => {
  await db?.query(`DROP DATABASE IF EXISTS \`${database}\``);
  await db?.end();
});

const chat = (model: string): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });

it('the database routes the issue’s spellings to the free model (the premise, on this server)', () => {
  expect(collations).toContain('utf8mb4_general_ci');
  const routed = (s: string): string[] => verdicts.find((v) => v.spelling === s)!.routedFreeBy;
  expect(routed('vend-flash-FREE')).toContain('utf8mb4_general_ci');
  expect(routed('vend-flash-free ')).toContain('utf8mb4_general_ci');
  expect(routed('vend-flaßh-free')).toContain('utf8mb4_general_ci');
  expect(routed('vend-flash-free\t')).toEqual([]);
  expect(verdicts.filter((v) => v.routedFreeBy.length > 0).length).toBeGreaterThanOrEqual(14);
  // Letters beyond the Basic Multilingual Plane, where the server has uca1400_ai_ci (MariaDB 10.10+).
  if (collations.includes('utf8mb4_uca1400_ai_ci')) expect(routed('vend-flash-\u{1f193}')).toContain('utf8mb4_uca1400_ai_ci');
});

describe.each([
  { rule: 'the suffix rule', freeTier: {}, listed: false },
  { rule: 'a list of free ids', freeTier: { models: FREE_IDS }, listed: true },
])('free models spelt as the relay database compares them, under $rule', ({ freeTier, listed }) => {
  const h = useHarness({ store: 'redis', file: { freeTier } });

  it('counts every spelling some collation routes to a free model, and no other (but one ending in -free as sent, under the suffix rule)', async () => {
    const seen: Array<{ spelling: string; status: number; counted: number; relayRead: string | undefined; rateLimit: boolean }> = [];
    const expected: typeof seen = [];
    for (const { spelling, routedFreeBy } of verdicts) {
      const { user, key } = await freshUser(h, 'spelling');
      h.relay.reset();
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: chat(spelling) });
      seen.push({ spelling, status: r.status, counted: await usedToday(h, user), relayRead: h.relay.requests[0]?.model, rateLimit: r.headers['ratelimit'] !== undefined });
      // Each call reaches the relay as sent; a free one is counted and answered with the free tier's RateLimit fields.
      const free = routedFreeBy.length > 0 || (!listed && spelling.endsWith('-free'));
      expected.push({ spelling, status: 200, counted: free ? 1 : 0, relayRead: spelling, rateLimit: free });
    }
    expect(seen).toEqual(expected);
  });

  it('shares one budget between the spellings: the 21st call in a minute is refused, whichever spelling it uses', async () => {
    const { key } = await freshUser(h, 'spellings');
    const routed = verdicts.filter((v) => v.routedFreeBy.length > 0).map((v) => v.spelling);
    const statuses: number[] = [];
    for (let i = 0; i < 21; i++) {
      const r = await request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: chat(routed[i % routed.length]!) });
      statuses.push(r.status);
      if (i === 20) expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'free_tier_rate_limited' } });
    }
    expect(statuses).toEqual([...Array<number>(20).fill(200), 429]);
  });

  it('counts a spelling in the path of the native generative-content routes too', async () => {
    const { user, key } = await freshUser(h, 'spelling-path');
    const r = await request(h.url, 'POST', '/v1beta/models/VEND-FLASH-FREE:generateContent', {
      headers: { 'x-goog-api-key': key },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'hi' }] }] }),
    });
    expect([r.status, await usedToday(h, user)]).toEqual([200, 1]);
  });
});
