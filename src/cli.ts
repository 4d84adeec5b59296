/**
 * `sluice` command line: key operations ("whose key is this" included), limit state and resets,
 * config checks, and start. Key and limit commands work on the configured store directly, or
 * through a running sluice's admin API (`--admin-url`), which the embedded store needs since it
 * lives inside that process (src/admin/client.ts).
 *
 * Exit codes: 0 done, 1 not found, refused or unreachable, 2 usage (no store named, or --admin-url
 * without SLUICE_ADMIN_TOKEN), 78 configuration error.
 */
import { parseArgs } from 'node:util';
import { AdminCallError, apiClient, directClient, type AdminClient } from './admin/client.js';
import { buildToolConfig, loadToolConfig, publicConfig, readConfigFile, upstreamSet } from './config/index.js';
import { AdminError } from './admin/errors.js';
import { ConfigError } from './config/error.js';
import { versionLine } from './runtime/version.js';

const STORE_NOTE = `Key and limit commands use the sidecars' own settings: SLUICE_REDIS_URL (or redis.url
in SLUICE_CONFIG), the key prefix, SLUICE_RELAY_DB, the limits. Without Redis, pass
--admin-url http://<host>:9090 (or set SLUICE_ADMIN_URL) and SLUICE_ADMIN_TOKEN to use a
running sluice.`;

/** The usage of each command and subcommand: `sluice <command> [<subcommand>] --help` prints it. */
const HELP: Readonly<Record<string, string>> = {
  '': `usage: sluice <command> [options]

  sluice start                                   start the sidecar (same as npm start)
  sluice keys create --user <id> [--name <n>] [--key <existing key>]
  sluice keys list --user <id>
  sluice keys delete <key id>
  sluice keys lookup < file                      whose key is this, valid or why not (key on stdin)
  sluice limits show --user <id> | --ip <address>
  sluice limits reset --user <id> | --ip <address>   unblock: reset the counts on every replica
  sluice config check <file>                     validate a config file, print the effective config
  sluice --version                               the version, the commit built from and the Node running it
  sluice help | --help                           this text; \`sluice <command> --help\` for one command

${STORE_NOTE}
Exit codes: 0 done, 1 not found, refused or unreachable, 2 usage, 78 configuration error.
`,
  start: `usage: sluice start

Starts the sidecar in the foreground, as npm start does: settings from the environment and
SLUICE_CONFIG (docs/configuration.md); SIGTERM drains and exits 0; exit 78 on a configuration error.
`,
  keys: `usage: sluice keys <create|list|delete|lookup> [options] [--admin-url <url>]

  sluice keys create --user <id> [--name <n>] [--key <existing key>]
  sluice keys list --user <id>
  sluice keys delete <key id>
  sluice keys lookup < file

${STORE_NOTE}
`,
  'keys create': `usage: sluice keys create --user <id> [--name <name>] [--key - < file-holding-the-key] [--admin-url <url>]

Makes a key for user <id> in sluice's registry and prints it once (JSON); --key - imports an
existing one read from standard input (16-256 visible ASCII characters after an optional sk-, no
"-"). --key <existing key> works too, but ps and shell history show it.
`,
  'keys list': `usage: sluice keys list --user <id> [--admin-url <url>]

Lists the user's keys in sluice's registry (ids, names, creation times; never the keys).
`,
  'keys delete': `usage: sluice keys delete <key id> [--admin-url <url>]

Deletes a key of sluice's registry; every replica stops accepting it within a second. Exit 1 when
no key has that id. Keys made in the relay's console are deleted in the console.
`,
  'keys lookup': `usage: sluice keys lookup [--admin-url <url>] < file-holding-the-key

Reads one key from standard input (never from the command line, where ps would show it) and
prints {"id","user","source","valid","reason"}: which source holds it (relay-db, registry, or
null), its id and user, whether a request with it authenticates now, and if not why (the access
line's reason). Looked up as requests are (sk- and a -<suffix> aside), without the key cache.
The key is neither printed nor logged. Exit 0 whenever the sources answered.
`,
  limits: `usage: sluice limits <show|reset> (--user <id> | --ip <address>) [--admin-url <url>]

  sluice limits show --user <id>        the user's free-tier counts: used, remaining, waits
  sluice limits show --ip <address>     the address's counts under each per-IP rule, and the
                                        bucket it counts in (IPv6: its /64 by default)
  sluice limits reset --user <id>       deletes the user's free-tier counts (window and today)
  sluice limits reset --ip <address>    deletes the address bucket's per-IP counts
A reset reaches every replica: each forgets the refusals it remembers. It prints the state after.

${STORE_NOTE}
`,
  'limits show': '',
  'limits reset': '',
  config: `usage: sluice config check <file>

Validates a config file with the SLUICE_* variables of this shell (the environment wins), as
start-up would: exit 0 and the effective config as JSON on stdout (a set secret as "[redacted]"),
or exit 78 and a message naming the bad key. The printed config, saved as a file with the
secrets given again, is accepted and gives the same config.
`,
  'config check': '',
};

class UsageError extends Error {
  override name = 'UsageError';
}

function fail(msg: string, code: number): never {
  const text = msg.endsWith('\n') ? msg : `${msg}\n`;
  // A usage text stands alone; anything else says who is speaking.
  process.stderr.write(text.startsWith('usage:') ? text : `sluice: ${text}`);
  process.exit(code);
}

function helpFor(path: string): string {
  const text = HELP[path];
  return text === '' || text === undefined ? (HELP[path.split(' ')[0]!] ?? HELP['']!) : text;
}

/** Every option of every command; each command says which it takes. */
const OPTIONS = {
  user: { type: 'string' },
  name: { type: 'string' },
  key: { type: 'string' },
  ip: { type: 'string' },
  'admin-url': { type: 'string' },
} as const;

/** Parses a command's options; an unknown, malformed or misplaced one is a usage error. */
function options(args: string[], takes: ReadonlyArray<keyof typeof OPTIONS>, usage: string) {
  const refuse = (msg: string): UsageError => new UsageError(`${msg}\n\n${helpFor(usage)}`);
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; allowPositionals: true; options: typeof OPTIONS }>>;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    throw refuse((err as Error).message);
  }
  for (const name of Object.keys(parsed.values)) {
    if (name !== 'admin-url' && !takes.includes(name as keyof typeof OPTIONS)) throw refuse(`sluice ${usage} takes no --${name}`);
  }
  return parsed;
}

async function client(adminUrl: string | undefined): Promise<AdminClient> {
  const url = adminUrl ?? process.env.SLUICE_ADMIN_URL;
  if (url) {
    const token = process.env.SLUICE_ADMIN_TOKEN;
    if (!token) throw new UsageError('SLUICE_ADMIN_TOKEN is required with --admin-url');
    // Credentials in the URL would be echoed by every error about it (and fetch refuses them anyway).
    if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(url)) throw new UsageError('--admin-url must not hold credentials (user:pass@): the admin token goes in SLUICE_ADMIN_TOKEN');
    return apiClient(url, token);
  }
  const cfg = loadToolConfig(process.env);
  if (!cfg.redis.url) {
    throw new UsageError('no SLUICE_REDIS_URL configured: the embedded store lives inside the running sluice; use --admin-url http://<host>:<admin port> with SLUICE_ADMIN_TOKEN');
  }
  return directClient(cfg, cfg.redis.url);
}

const print = (v: unknown): void => void process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);

/** Standard input, whole: where `keys lookup` and `keys create --key -` read a key (argv would show it in ps). */
async function stdinText(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Paste the key, then press Enter and Ctrl-D.\n');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of process.stdin as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 64 * 1024) throw new UsageError('sluice reads one key from standard input; this is far longer than a key');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8').trim();
}

async function keys(args: string[]): Promise<void> {
  const sub = args[0];
  if (sub !== 'create' && sub !== 'list' && sub !== 'delete' && sub !== 'lookup')
    throw new UsageError(sub === undefined ? HELP.keys! : `unknown keys command "${sub}"\n\n${HELP.keys}`);
  const usage = (msg: string): UsageError => new UsageError(`${msg}\n\n${helpFor(`keys ${sub}`)}`);
  const keyOnCommandLine = sub === 'lookup' && args.some((a) => a === '--key' || a.startsWith('--key='));
  if (keyOnCommandLine) throw usage('keys lookup reads the key from standard input, not from the command line (where ps would show it)');
  const takes = sub === 'create' ? (['user', 'name', 'key'] as const) : sub === 'list' ? (['user'] as const) : ([] as const);
  const { values, positionals } = options(args.slice(1), takes, `keys ${sub}`);
  if ((sub === 'create' || sub === 'list') && !values.user) throw usage(`keys ${sub} needs --user <id>`);
  if (sub === 'delete' && !positionals[0]) throw usage('keys delete needs a key id');
  if (sub === 'lookup' && positionals.length > 0) throw usage('keys lookup reads the key from standard input, not from the command line (where ps would show it)');
  // `keys create --key -` imports the key read from standard input; a key given on the command line still works, with a warning.
  const keyFromStdin = sub === 'lookup' || (sub === 'create' && values.key === '-');
  const key = keyFromStdin ? await stdinText() : '';
  if (keyFromStdin && key === '') throw usage(`keys ${sub} read no key from standard input`);
  if (sub === 'create' && values.key !== undefined && values.key !== '-') {
    process.stderr.write('sluice: the key was given on the command line, where ps and shell history show it; next time use --key - and standard input\n');
  }
  const ops = await client(values['admin-url']);
  try {
    if (sub === 'create') {
      const body: Record<string, string> = { user: values.user! };
      if (values.name) body.name = values.name;
      if (values.key) body.key = values.key === '-' ? key : values.key;
      print(await ops.createKey(body));
      process.stderr.write('The key is shown only now; store it safely.\n');
    } else if (sub === 'list') {
      print(await ops.listKeys(values.user!));
    } else if (sub === 'delete') {
      const id = positionals[0]!;
      if (!(await ops.deleteKey(id))) throw new AdminCallError(`no key with id ${id}`);
      process.stdout.write(`deleted ${id}\n`);
    } else {
      print(await ops.lookupKey(key));
    }
  } finally {
    await ops.close();
  }
}

async function limits(args: string[]): Promise<void> {
  const sub = args[0];
  if (sub !== 'show' && sub !== 'reset') throw new UsageError(sub === undefined ? HELP.limits! : `unknown limits command "${sub}"\n\n${HELP.limits}`);
  const { values, positionals } = options(args.slice(1), ['user', 'ip'], `limits ${sub}`);
  if (positionals.length > 0 || (values.user === undefined) === (values.ip === undefined)) {
    throw new UsageError(`limits ${sub} needs one of --user <id> or --ip <address>\n\n${HELP.limits}`);
  }
  const ops = await client(values['admin-url']);
  try {
    const reset = sub === 'reset';
    if (values.user === undefined) return print(await ops.ipLimits(values.ip!, reset));
    const answer = await ops.userLimits(values.user, reset);
    print(answer);
    // A mistyped id reads exactly as an idle user: said, on stderr, so that stdout stays the answer.
    if (!reset && countsNothing(answer))
      process.stderr.write("note: no free-tier call of this user is counted today; if they are refused, check the id (the access line's user field)\n");
  } finally {
    await ops.close();
  }
}

/** Whether a user's limits (GET /admin/users/<id>/limits) count no call today, in the window or the day. */
function countsNothing(answer: unknown): boolean {
  const counts = (answer as { freeTier?: { window?: { used?: number }; day?: { used?: number } } }).freeTier;
  return counts?.window?.used === 0 && counts.day?.used === 0;
}

function configCheck(args: string[]): void {
  if (args[0] !== 'check') throw new UsageError(args[0] === undefined ? HELP.config! : `unknown config command "${args[0]}"\n\n${HELP.config}`);
  const file = args[1];
  if (!file || args.length > 2) throw new UsageError(`config check needs one file\n\n${HELP.config}`);
  const cfg = buildToolConfig(readConfigFile(file), process.env);
  // Only the effective config on stdout, so that it can be saved as a file as it is.
  process.stderr.write(`${file}: valid\n`);
  if (!upstreamSet(cfg)) process.stderr.write('note: upstream.url is not set here (nor SLUICE_UPSTREAM_URL): sluice start needs it\n');
  print(publicConfig(cfg));
}

/** The command and subcommand named before a `--help`/`-h`, as a HELP key. */
function helpPath(argv: string[]): string {
  const words = argv
    .slice(
      0,
      argv.findIndex((a) => a === '--help' || a === '-h'),
    )
    .filter((a) => !a.startsWith('-'));
  for (let n = Math.min(2, words.length); n > 0; n--) {
    const path = words.slice(0, n).join(' ');
    if (path in HELP) return path;
  }
  return '';
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd === '--version' || cmd === '-v' || cmd === 'version') {
    process.stdout.write(`${versionLine()}\n`);
    return;
  }
  // `--help` anywhere asks for the usage of what it follows, and does nothing else.
  if (argv.includes('--help') || argv.includes('-h') || cmd === 'help') {
    process.stdout.write(cmd === 'help' ? HELP['']! : helpFor(helpPath(argv)));
    return;
  }
  if (cmd === undefined) throw new UsageError(HELP['']!);
  if (cmd === 'start') {
    if (rest.length > 0) throw new UsageError(`start takes no arguments\n\n${HELP.start}`);
    await import('./main.js');
  } else if (cmd === 'keys') await keys(rest);
  else if (cmd === 'limits') await limits(rest);
  else if (cmd === 'config') configCheck(rest);
  else throw new UsageError(`unknown command "${cmd}"\n\n${HELP['']}`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) fail(err.message, 2);
  if (err instanceof ConfigError) fail(`configuration error: ${err.message}`, 78);
  if (err instanceof AdminError || err instanceof AdminCallError) fail(err.message, 1);
  fail(err instanceof Error ? err.message : String(err), 1);
});
