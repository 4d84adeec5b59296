/**
 * `sluice` command line: key operations against the configured store, config
 * checks, and start. With no Redis configured, key operations go through a
 * running sluice's admin API (`--admin-url`), because the embedded store
 * lives inside that process.
 */
import { parseArgs } from 'node:util';
import { KeyService } from './admin/keys.js';
import { systemClock } from './runtime/clock.js';
import { buildConfig, loadConfig, publicConfig, readConfigFile } from './config/index.js';
import { AdminError, ConfigError } from './answers/errors.js';
import { RedisStore, redisStoreOptions } from './store/redis/index.js';
import { versionLine } from './runtime/version.js';

const USAGE = `usage: sluice <command>

  sluice start                                   start the sidecar (same as npm start)
  sluice keys create --user <id> [--name <n>] [--key <existing key>]
  sluice keys list --user <id>
  sluice keys delete <key id>
  sluice config check <file>                     validate a config file (exit 0 when valid)
  sluice --version                               the version, the commit built from and the Node running it

Key commands use SLUICE_REDIS_URL (or redis.url in SLUICE_CONFIG). Without Redis,
pass --admin-url http://host:9090 (and SLUICE_ADMIN_TOKEN) to use a running sluice.
`;

interface KeyOps {
  create(body: Record<string, string>): Promise<unknown>;
  list(user: string): Promise<unknown>;
  remove(id: string): Promise<boolean>;
  close(): Promise<void>;
}

function fail(msg: string, code = 2): never {
  process.stderr.write(`sluice: ${msg}\n`);
  process.exit(code);
}

async function redisOps(): Promise<KeyOps> {
  const env = { ...process.env, SLUICE_UPSTREAM_URL: process.env.SLUICE_UPSTREAM_URL || 'http://unused.invalid' };
  const cfg = loadConfig(env);
  if (!cfg.redis.url) {
    fail('no SLUICE_REDIS_URL configured: the embedded store lives inside the running sluice; use --admin-url http://<host>:<admin port> with SLUICE_ADMIN_TOKEN');
  }
  // The same prefix, Sentinel or Cluster as the sidecars, or the keys land where none of them looks;
  // a longer command bound, since a person waits here, not a request.
  const store = new RedisStore({ ...redisStoreOptions(cfg.redis, cfg.redis.url), commandTimeoutMs: Math.max(2000, cfg.redis.commandTimeoutMs) });
  try {
    await store.waitReady(5000);
  } catch (err) {
    await store.close();
    fail(`cannot reach Redis: ${(err as Error).message}`, 1);
  }
  const svc = new KeyService(store, systemClock);
  return {
    create: (b) => svc.create(b),
    list: async (user) => ({ keys: await svc.list(user) }),
    remove: async (id) => (await svc.remove(id)) !== null,
    close: () => store.close(),
  };
}

function adminOps(base: string): KeyOps {
  const token = process.env.SLUICE_ADMIN_TOKEN;
  if (!token) fail('SLUICE_ADMIN_TOKEN is required with --admin-url');
  const call = async (method: string, path: string, body?: unknown): Promise<Response> => {
    const r = await fetch(new URL(path, base), {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status >= 400 && r.status !== 404) fail(`admin API answered ${r.status}: ${await r.text()}`, 1);
    return r;
  };
  return {
    create: async (b) => (await call('POST', '/admin/keys', b)).json(),
    list: async (user) => (await call('GET', `/admin/keys?user=${encodeURIComponent(user)}`)).json(),
    remove: async (id) => (await call('DELETE', `/admin/keys/${encodeURIComponent(id)}`)).status === 204,
    close: async () => {},
  };
}

async function keys(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { user: { type: 'string' }, name: { type: 'string' }, key: { type: 'string' }, 'admin-url': { type: 'string' } },
  });
  const [sub, arg] = positionals;
  if (sub !== 'create' && sub !== 'list' && sub !== 'delete') fail(USAGE);
  const adminUrl = values['admin-url'] ?? process.env.SLUICE_ADMIN_URL;
  const ops = adminUrl ? adminOps(adminUrl) : await redisOps();
  try {
    if (sub === 'create') {
      if (!values.user) fail('keys create needs --user <id>');
      const body: Record<string, string> = { user: values.user };
      if (values.name) body.name = values.name;
      if (values.key) body.key = values.key;
      const created = await ops.create(body);
      process.stdout.write(JSON.stringify(created, null, 2) + '\n');
      process.stderr.write('The key is shown only now; store it safely.\n');
    } else if (sub === 'list') {
      if (!values.user) fail('keys list needs --user <id>');
      process.stdout.write(JSON.stringify(await ops.list(values.user), null, 2) + '\n');
    } else if (sub === 'delete') {
      if (!arg) fail('keys delete needs a key id');
      if (!(await ops.remove(arg))) fail(`no key with id ${arg}`, 1);
      process.stdout.write(`deleted ${arg}\n`);
    } else {
      fail(USAGE);
    }
  } catch (err) {
    if (err instanceof AdminError) fail(err.message, 1);
    throw err;
  } finally {
    await ops.close();
  }
}

function configCheck(file: string | undefined): void {
  if (!file) fail('config check needs a file');
  const env = { ...process.env, SLUICE_UPSTREAM_URL: process.env.SLUICE_UPSTREAM_URL || 'http://unused.invalid' };
  const cfg = buildConfig(readConfigFile(file), env);
  process.stdout.write(`${file}: valid\n${JSON.stringify(publicConfig(cfg), null, 2)}\n`);
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  try {
    if (cmd === 'start') await import('./main.js');
    else if (cmd === 'keys') await keys(rest);
    else if (cmd === 'config' && rest[0] === 'check') configCheck(rest[1]);
    else if (cmd === '--version' || cmd === '-v' || cmd === 'version') process.stdout.write(`${versionLine()}\n`);
    else if (cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h') process.stdout.write(USAGE);
    else fail(`unknown command "${cmd}"\n\n${USAGE}`);
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`, 78);
    throw err;
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // An unknown or malformed option is a usage error (exit 2), like a missing argument.
  const usage = err instanceof Error && 'code' in err && typeof err.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS_');
  fail(err instanceof Error ? err.message : String(err), usage ? 2 : 1);
});
