/**
 * The `sluice` command line as an operator runs it (spawned, as in the Pod): usage and help,
 * "whose key is this" with the key on standard input, "unblock this user" directly on Redis and
 * through the admin API, and `config check` printing an effective config that round-trips.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { freshUser } from '../support/helpers.js';
import { request } from '../support/http.js';
import { uniquePrefix } from '../support/redis.js';
import { consoleKey, createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { eventually } from '../support/time.js';

/** The environment of a shell with no sluice settings of its own. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLUICE_')) env[k] = v;
  return { ...env, ...extra };
}

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `bin/sluice.js args`, with `stdin` written to its standard input; never rejects. */
function sluice(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn('node', ['bin/sluice.js', ...args], { env: cleanEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });
}

const made: string[] = [];
const tmp = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'));
  made.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

describe('sluice: usage and help', () => {
  it('prints the usage on stderr and exits 2 with no command, or an unknown one', async () => {
    for (const args of [[], ['frobnicate'], ['keys'], ['limits'], ['limits', 'clear', '--user', 'a'], ['config']]) {
      const r = await sluice(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr, args.join(' ')).toMatch(/usage: sluice/);
    }
  });

  it('answers --help (and -h) on every command and subcommand with its own usage on stdout, exit 0, doing nothing else', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--help'], /^usage: sluice <command>/],
      [['help'], /^usage: sluice <command>/],
      [['start', '--help'], /^usage: sluice start\n/],
      [['keys', '--help'], /^usage: sluice keys <create\|list\|delete\|lookup>/],
      [['keys', 'create', '--help'], /^usage: sluice keys create --user <id>/],
      [['keys', 'list', '-h'], /^usage: sluice keys list --user <id>/],
      [['keys', 'delete', '--help'], /^usage: sluice keys delete <key id>/],
      [['keys', 'lookup', '--help'], /^usage: sluice keys lookup .*< file/],
      [['limits', '--help'], /^usage: sluice limits <show\|reset>/],
      [['limits', 'show', '--help'], /^usage: sluice limits <show\|reset>/],
      [['limits', 'reset', '--user', 'a', '--help'], /^usage: sluice limits <show\|reset>/],
      [['config', '--help'], /^usage: sluice config check <file>/],
      [['config', 'check', '--help'], /^usage: sluice config check <file>/],
    ];
    // An unreachable Redis: a command that ran instead of helping would fail (exit 1).
    const env = { SLUICE_REDIS_URL: 'redis://127.0.0.1:1' };
    const results = await Promise.all(cases.map(([args]) => sluice(args, env)));
    results.forEach((r, i) => {
      const [args, usage] = cases[i]!;
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(usage);
      expect(r.stderr, args.join(' ')).toBe('');
    });
  });

  it('refuses a key on the command line for a lookup: argv shows in ps', async () => {
    for (const args of [
      ['keys', 'lookup', 'sk-abcdefghijklmnop'],
      ['keys', 'lookup', '--key', 'sk-abcdefghijklmnop'],
    ]) {
      const r = await sluice(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('standard input');
      expect(r.stderr).not.toContain('abcdefghijklmnop');
    }
  });

  it('says how to reach the store when none is named, or the admin API without its token: exit 2, nothing done', async () => {
    // No SLUICE_REDIS_URL: the embedded store lives inside a running sluice, reached through its admin API.
    for (const args of [
      ['keys', 'create', '--user', 'alice'],
      ['limits', 'show', '--user', 'alice'],
    ]) {
      const r = await sluice(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr, args.join(' ')).toContain('use --admin-url');
    }
    // Nothing listens on port 1: a command that tried to call would exit 1.
    const r = await sluice(['limits', 'show', '--user', 'alice', '--admin-url', 'http://127.0.0.1:1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('SLUICE_ADMIN_TOKEN is required');
  });
});

describe('sluice keys lookup and limits, directly on Redis', () => {
  let fx: RelayDbFixture;
  let h: Harness;
  let env: Record<string, string>;
  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    const prefix = uniquePrefix('cli');
    // The sidecar and the command line read the same settings, as in the Pod.
    const dir = tmp();
    writeFileSync(`${dir}/config.yaml`, stringifyYaml({ redis: { keyPrefix: prefix }, freeTier: { perMinute: 1 } }));
    env = { SLUICE_REDIS_URL: inject('redisUrl'), SLUICE_CONFIG: `${dir}/config.yaml`, SLUICE_RELAY_DB: fx.dsn };
    h = await startHarness({ store: 'redis', prefix, file: { freeTier: { perMinute: 1 } }, env: { SLUICE_RELAY_DB: fx.dsn } });
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it('reads the key from standard input and names its source, id and user, or why it is refused; the key is never printed', async () => {
    const user = await fx.addUser();
    const relayKey = await fx.addToken(user, { remain_quota: 0 });
    const registry = await h.createKey('cli-owner');
    const [a, b, c] = await Promise.all([
      sluice(['keys', 'lookup'], env, `sk-${relayKey.key}\n`),
      sluice(['keys', 'lookup'], env, registry.key),
      sluice(['keys', 'lookup'], env, `sk-${consoleKey()}`),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(JSON.parse(a.stdout)).toEqual({ id: String(relayKey.id), user: String(user), source: 'relay-db', valid: false, reason: 'key_exhausted' });
    expect(JSON.parse(b.stdout)).toEqual({ id: registry.id, user: 'cli-owner', source: 'registry', valid: true, reason: null });
    expect(JSON.parse(c.stdout)).toEqual({ id: null, user: null, source: null, valid: false, reason: 'unknown_key' });
    expect(a.stdout + a.stderr).not.toContain(relayKey.key);
    expect(b.stdout + b.stderr).not.toContain(registry.key.slice(3));
    const empty = await sluice(['keys', 'lookup'], env, '\n');
    expect(empty.code).toBe(2);
  });

  it('shows a refused user and resets them; the running sidecar admits the next call at once', async () => {
    const { user, key } = await freshUser(h, 'cli-blocked');
    const call = () =>
      request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash-free', messages: [] }) });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429); // remembered by the sidecar from now on
    const shown = await sluice(['limits', 'show', '--user', user], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ freeTier: { user, window: { used: 1, remaining: 0 }, day: { used: 1 } } });
    const reset = await sluice(['limits', 'reset', '--user', user], env);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({ freeTier: { window: { used: 0 }, day: { used: 0 } } });
    await eventually(async () => expect((await call()).status).toBe(200), { timeoutMs: 1000, intervalMs: 20, what: 'the free call let through after the reset' });
  });

  it('shows an address by the bucket it counts in, and refuses one that is none (exit 1, not echoing it)', async () => {
    const r = await sluice(['limits', 'show', '--ip', '2001:DB8::5'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ipLimits: { address: '2001:db8::5', bucket: '2001:db8::/64', rules: [{ name: 'usage-query' }, { name: 'api-and-dashboard' }] } });
    const bad = await sluice(['limits', 'reset', '--ip', 'not-an-address'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('IPv4 or IPv6 address');
  });

  it("holds a user id to the admin API's rule: one that is none is refused (exit 1, not echoing it), never shown or reset as an idle user", async () => {
    for (const user of ['a{b}', 'a/b', '', 'x'.repeat(129)]) {
      for (const sub of ['show', 'reset']) {
        const r = await sluice(['limits', sub, '--user', user], env);
        expect(r.code, `limits ${sub} --user ${JSON.stringify(user)}`).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/user id/i);
        if (user !== '') expect(r.stderr).not.toContain(user);
      }
    }
  });

  it('says, besides the zeros, that a user id it shows has no call counted today (a mistyped id reads so)', async () => {
    const r = await sluice(['limits', 'show', '--user', 'no-such-user-7'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ freeTier: { user: 'no-such-user-7', window: { used: 0 }, day: { used: 0 } } });
    expect(r.stderr).toMatch(/no free-tier call of this user is counted today/);
  });
});

describe('sluice keys lookup and limits, through the admin API (the embedded store)', () => {
  let h: Harness;
  let env: Record<string, string>;
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', file: { freeTier: { perMinute: 1 } } });
    env = { SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, SLUICE_ADMIN_URL: h.adminUrl };
  });
  afterAll(() => h?.close());

  it('looks a key up and unblocks a user as the direct commands do', async () => {
    const { user, key } = await freshUser(h, 'api-blocked');
    const call = () =>
      request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash-free', messages: [] }) });
    const found = await sluice(['keys', 'lookup', '--admin-url', h.adminUrl], { SLUICE_ADMIN_TOKEN: ADMIN_TOKEN }, key);
    expect(found.code, found.stderr).toBe(0);
    expect(JSON.parse(found.stdout)).toMatchObject({ user, source: 'registry', valid: true, reason: null });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429);
    const reset = await sluice(['limits', 'reset', '--user', user], env);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({ freeTier: { window: { used: 0 } } });
    expect((await call()).status).toBe(200);
    const ip = await sluice(['limits', 'show', '--ip', '::ffff:10.1.2.3'], env);
    expect(JSON.parse(ip.stdout)).toMatchObject({ ipLimits: { address: '10.1.2.3', bucket: '10.1.2.3' } });
  });

  it('imports a key read from standard input (--key -); one given on the command line works, with a warning', async () => {
    const piped = `sk-${'P'.repeat(20)}${randomBytes(12).toString('hex')}`;
    const fromStdin = await sluice(['keys', 'create', '--user', 'imported', '--key', '-'], env, `${piped}\n`);
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({ user: 'imported', key: piped });
    expect(fromStdin.stderr).not.toContain('command line');
    const argv = `sk-${'A'.repeat(20)}${randomBytes(12).toString('hex')}`;
    const fromArgv = await sluice(['keys', 'create', '--user', 'imported', '--key', argv], env);
    expect(fromArgv.code, fromArgv.stderr).toBe(0);
    expect(fromArgv.stderr).toContain('on the command line, where ps and shell history show it');
    const r = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${piped}` } });
    expect(r.status).toBe(200);
  });

  it('refuses an admin URL holding credentials (exit 2), without repeating them', async () => {
    const r = await sluice(['keys', 'list', '--user', 'u1', '--admin-url', 'http://op:S3cretPass42@127.0.0.1:1'], { SLUICE_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('must not hold credentials');
    expect(r.stderr).not.toContain('S3cretPass42');
  });
});

describe('sluice config check: the effective config round-trips', () => {
  const secrets = {
    SLUICE_REDIS_URL: 'redis://:redispw@127.0.0.1:6379/2',
    SLUICE_RELAY_DB: 'relay:dbpw@tcp(db:3306)/newapi?parseTime=True',
    SLUICE_UPSTREAM_CREDENTIAL: 'sk-upstream-credential-secret',
  };

  it('prints the config as a file gives it: relayDb.url, [redacted] only for a set secret, the upstream as given', async () => {
    const dir = tmp();
    writeFileSync(`${dir}/a.yaml`, stringifyYaml({ upstream: { url: 'http://relay:3000' }, freeTier: { perMinute: 7 }, redis: { keyPrefix: 'p:' } }));
    const r = await sluice(['config', 'check', `${dir}/a.yaml`], { SLUICE_RELAY_DB: secrets.SLUICE_RELAY_DB });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('valid');
    const printed = JSON.parse(r.stdout) as Record<string, Record<string, unknown>>;
    expect(printed.upstream).toMatchObject({ url: 'http://relay:3000/', credential: null });
    expect(printed.relayDb).toMatchObject({ url: '[redacted]', schema: 'auto' });
    expect(printed.relayDb).not.toHaveProperty('dsn');
    expect(printed.redis).toMatchObject({ url: null, keyPrefix: 'p:' });
    expect(r.stdout).not.toMatch(/dbpw|unused\.invalid|upstream-not-set/);
  });

  it('shows no placeholder when no upstream is given anywhere, and says start needs one', async () => {
    const dir = tmp();
    writeFileSync(`${dir}/b.yaml`, 'freeTier:\n  perDay: 50\n');
    const r = await sluice(['config', 'check', `${dir}/b.yaml`]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ upstream: { url: null }, freeTier: { perDay: 50 } });
    expect(r.stderr).toContain('upstream.url is not set');
  });

  it('accepts its own output saved as a file, with the secrets given again, and prints the same config; without them it names the key', async () => {
    const dir = tmp();
    writeFileSync(
      `${dir}/c.yaml`,
      stringifyYaml({
        upstream: { url: 'http://relay:3000', headersTimeoutSeconds: 900 },
        redis: { clusterNodes: ['r1:6379', 'r2:6379'], batchDecisions: false },
        freeTier: { models: ['a-free', 'b-free'], timeZone: 'UTC' },
        ipLimits: [{ name: 'q', paths: ['/api/log/token'], limit: 3, windowSeconds: 60 }],
        trustedProxies: ['10.0.0.0/8'],
        relayDb: { poolSize: 4 },
      }),
    );
    const first = await sluice(['config', 'check', `${dir}/c.yaml`], secrets);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(`${dir}/printed.yaml`, stringifyYaml(JSON.parse(first.stdout)));
    writeFileSync(`${dir}/printed.json`, first.stdout);
    for (const saved of ['printed.yaml', 'printed.json']) {
      const again = await sluice(['config', 'check', `${dir}/${saved}`], secrets);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toEqual(JSON.parse(first.stdout));
    }
    const bare = await sluice(['config', 'check', `${dir}/printed.yaml`], { SLUICE_REDIS_URL: secrets.SLUICE_REDIS_URL });
    expect(bare.code).toBe(78);
    expect(bare.stderr).toMatch(/relayDb\.url holds "\[redacted\]"|upstream\.credential holds "\[redacted\]"/);
  });
});
