/**
 * What the relay's database sees from one replica, against how many keys are in use: the real
 * Authenticator and RelayKeySource (in this process) over a real PostgreSQL database with the
 * relay's tables, every key in use presented about once a second, statements counted once the
 * first lookups are done and renewals have cycled. Needs PostgreSQL (an administrator's URL,
 * `--pg`); makes and drops a database of its own.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { Authenticator } from '../../src/auth/authenticator.js';
import { openDriver, type RelayDbDriver } from '../../src/auth/relay-db/driver.js';
import { parseRelayDsn } from '../../src/auth/relay-db/dsn.js';
import { RelayKeySource } from '../../src/auth/relay-db/source.js';
import { systemClock } from '../../src/runtime/clock.js';
import { relayDdl } from '../../test/support/relay-schema.js';
import { f, info, int, numFlag, sleep, strFlag, table, type Scenario } from '../lib/scenario.js';

/** Whether `p` settles within a few microtask turns: a key answered from the cache, without a lookup. */
async function atOnce(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

export const relayDbLoad: Scenario = {
  name: 'relay-db-load',
  summary: "statements a second the relay's database sees from one replica, by keys in use (needs PostgreSQL)",
  flags: {
    keys: { type: 'string', help: 'keys in use, comma-separated (default 1000,10000)' },
    seconds: { type: 'string', help: 'seconds per row (default 40; the last 25 are counted)' },
    recheck: { type: 'string', help: 'relayDb.recheckSeconds (default 10)' },
    pg: { type: 'string', help: 'an administrator URL (default postgres://postgres@127.0.0.1:5432/postgres)' },
  },
  async run(ctx) {
    const sizes = (strFlag(ctx, 'keys') ?? (ctx.quick ? '200' : '1000,10000')).split(',').map(Number);
    const seconds = numFlag(ctx, 'seconds', ctx.quick ? 8 : 40);
    const recheck = numFlag(ctx, 'recheck', ctx.quick ? 2 : 10);
    const counted = Math.min(25, seconds / 2);
    const adminUrl = strFlag(ctx, 'pg') ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const name = `sluice_bench_${randomBytes(4).toString('hex')}`;
    const adm = new pg.Client({ connectionString: adminUrl });
    await adm.connect().catch((err: Error) => {
      throw new Error(`relay-db-load needs PostgreSQL (--pg <administrator URL>): ${err.message}`);
    });
    await adm.query(`CREATE DATABASE "${name}"`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const db = new pg.Pool({ connectionString: url.toString(), max: 2 });
    // An idle connection the server ends (a restart, another process's administration) must not end
    // this process: the next query fails instead, with its reason.
    db.on('error', () => {});
    adm.on('error', () => {});
    const rows: string[][] = [];
    try {
      for (const stmt of relayDdl('postgres', 'new-api')) await db.query(stmt);
      await db.query(`INSERT INTO users (username, password, status) SELECT 'u' || g, 'x', 1 FROM generate_series(1, 100) g`);
      const keys = Array.from({ length: Math.max(...sizes) }, () => randomBytes(24).toString('hex'));
      for (let i = 0; i < keys.length; i += 1000) {
        await db.query(
          `INSERT INTO tokens (user_id, "key", status, expired_time, remain_quota, unlimited_quota) SELECT (row_number() OVER ()) % 100 + 1, k, 1, -1, 1000000, false FROM unnest($1::text[]) k`,
          [keys.slice(i, i + 1000)],
        );
      }
      for (const n of sizes) {
        ctx.log(`${n} keys in use, ${seconds} s`);
        const dsn = parseRelayDsn(url.toString(), 'BENCH');
        const real = await openDriver(dsn, { poolSize: 2, queryTimeoutMs: 2000 });
        let statements = 0;
        let keysAsked = 0;
        const driver: RelayDbDriver = {
          dialect: real.dialect,
          query: (q) => {
            if (q.sql.includes('FROM tokens')) {
              statements++;
              keysAsked += q.params.length;
            }
            return real.query(q);
          },
          close: () => real.close(),
        };
        const source = new RelayKeySource({
          dsn,
          schema: null,
          poolSize: 2,
          queryTimeoutMs: 2000,
          maxAgeMs: recheck * 1000,
          staleMs: 900_000,
          clock: systemClock,
          log: pino({ level: 'silent' }),
          driver,
        });
        const auth = new Authenticator([source], systemClock);
        const inUse = keys.slice(0, n).map((k) => [`sk-${k}`]);
        const start = performance.now();
        const steadyFrom = start + (seconds - counted) * 1000;
        let checks = 0;
        let waited = 0;
        let mark: { statements: number; keysAsked: number; checks: number; waited: number; at: number } | null = null;
        // Each 10 ms, a hundredth of the keys: every key about once a second.
        for (let at = 0; performance.now() - start < seconds * 1000; ) {
          const pending: Promise<unknown>[] = [];
          for (let i = 0; i < Math.ceil(n / 100); i++) {
            const presented = inUse[at++ % n]!;
            checks++;
            const answer = auth.authenticate(presented);
            if (!(await atOnce(answer))) {
              waited++;
              pending.push(answer);
            }
          }
          await Promise.all(pending);
          if (mark === null && performance.now() >= steadyFrom) mark = { statements, keysAsked, checks, waited, at: performance.now() };
          await sleep(10);
        }
        const span = (performance.now() - mark!.at) / 1000;
        const st = statements - mark!.statements;
        rows.push([int(n), int((checks - mark!.checks) / span), f(st / span), f(st ? (keysAsked - mark!.keysAsked) / st : 0, 0), String(waited - mark!.waited)]);
        await source.close();
      }
    } finally {
      await db.end();
      await adm.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await adm.end();
    }
    return {
      report:
        table(['keys in use', 'key checks/s', 'statements/s', 'keys per statement', 'requests that waited on the database'], rows) +
        `\nOne replica, relayDb.recheckSeconds ${recheck}, each key in use presented about once a second; the last ${counted} s of ${seconds} counted.\n`,
      checks: rows.map((r) => info(`relay database, ${r[0]} keys in use`, `${r[2]} statements/s, ${r[4]} requests waited`)),
      data: rows,
    };
  },
};
