/**
 * What the relay's database sees from one replica, against how many keys are in use: the real
 * Authenticator and RelayKeySource over a real PostgreSQL database with the relay's tables, every
 * key in use presented about once a second, statements counted in the steady state (after the
 * first lookups, once renewals have cycled).
 *
 *   npx tsx bench/tools/relay-db-load.ts [keys ...] [--seconds N] [--recheck S]
 *
 * Defaults: 1000 and 10000 keys, 40 s each (the steady state is the last 25 s), recheck 10 s.
 * Needs PostgreSQL on 127.0.0.1:5432 as postgres with trust, or BENCH_PG_URL (an administrator's
 * URL); it creates and drops a database of its own.
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

const args = process.argv.slice(2);
const flag = (name: string, d: number): number => {
  const i = args.indexOf(name);
  if (i === -1) return d;
  const v = Number(args[i + 1]);
  args.splice(i, 2);
  return v;
};
const seconds = flag('--seconds', 40);
const recheck = flag('--recheck', 10);
const sizes = args.length ? args.map(Number) : [1000, 10_000];
const admin = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const name = `sluice_bench_${randomBytes(4).toString('hex')}`;

const adm = new pg.Client({ connectionString: admin });
await adm.connect();
await adm.query(`CREATE DATABASE "${name}"`);
const url = new URL(admin);
url.pathname = `/${name}`;
const db = new pg.Pool({ connectionString: url.toString(), max: 2 });
try {
  for (const stmt of relayDdl('postgres', 'new-api')) await db.query(stmt);
  const max = Math.max(...sizes);
  await db.query(`INSERT INTO users (username, password, status) SELECT 'u' || g, 'x', 1 FROM generate_series(1, 100) g`);
  const keys: string[] = [];
  for (let i = 0; i < max; i++) keys.push(randomBytes(24).toString('hex'));
  for (let i = 0; i < max; i += 1000) {
    const part = keys.slice(i, i + 1000);
    await db.query(
      `INSERT INTO tokens (user_id, "key", status, expired_time, remain_quota, unlimited_quota) SELECT (row_number() OVER ()) % 100 + 1, k, 1, -1, 1000000, false FROM unnest($1::text[]) k`,
      [part],
    );
  }

  console.log(`relay database load, one replica: recheck ${recheck} s, each key in use presented about once a second, ${seconds} s per row`);
  console.log('| keys in use | key checks/s | statements/s (steady) | keys per statement | requests that waited on the database (steady) |');
  console.log('|---:|---:|---:|---:|---:|');
  for (const n of sizes) {
    const dsn = parseRelayDsn(url.toString(), 'BENCH');
    const real = await openDriver(dsn, { poolSize: 2, queryTimeoutMs: 2000 });
    let statements = 0;
    let keysAsked = 0;
    const driver: RelayDbDriver = {
      dialect: real.dialect,
      query: (s) => {
        if (s.sql.includes('FROM tokens')) {
          statements++;
          keysAsked += s.params.length;
        }
        return real.query(s);
      },
      close: () => real.close(),
    };
    const source = new RelayKeySource({ dsn, schema: null, poolSize: 2, queryTimeoutMs: 2000, maxAgeMs: recheck * 1000, staleMs: 900_000, clock: systemClock, log: pino({ level: 'silent' }), driver });
    const auth = new Authenticator([source], systemClock);
    const inUse = keys.slice(0, n).map((k) => [`sk-${k}`]);
    const start = performance.now();
    const steadyFrom = start + (seconds - 25) * 1000;
    let checks = 0;
    let waited = 0;
    let mark: { statements: number; keysAsked: number; checks: number; waited: number; at: number } | null = null;
    // Each 10 ms, a hundredth of the keys: every key once a second.
    let at = 0;
    while (performance.now() - start < seconds * 1000) {
      const slice = Math.ceil(n / 100);
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < slice; i++) {
        const presented = inUse[at++ % n]!;
        checks++;
        if (auth.cached(presented) === null) {
          waited++;
          pending.push(auth.authenticate(presented));
        }
      }
      await Promise.all(pending);
      if (mark === null && performance.now() >= steadyFrom) mark = { statements, keysAsked, checks, waited, at: performance.now() };
      await new Promise((r) => setTimeout(r, 10));
    }
    const span = (performance.now() - mark!.at) / 1000;
    const st = statements - mark!.statements;
    const perStatement = st ? (keysAsked - mark!.keysAsked) / st : 0;
    console.log(
      `| ${n} | ${Math.round((checks - mark!.checks) / span)} | ${(st / span).toFixed(2)} | ${perStatement.toFixed(0)} | ${waited - mark!.waited} |`,
    );
    await source.close();
  }
} finally {
  await db.end();
  await adm.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await adm.end();
}
