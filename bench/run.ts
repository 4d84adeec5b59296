/**
 * `npm run bench`: sluice measured on this machine, over loopback, one named scenario at a time.
 *
 *   npm run bench                          the headline set: every scenario with a target
 *   npm run bench -- <scenario> [flags]    one scenario
 *   npm run bench -- --list                the scenarios and their flags
 *   npm run bench -- [<scenario>] --quick  a smoke run: short rounds, figures meaningless
 *
 * Prints each scenario's tables and its targets as PASS / FAIL lines, and writes them to
 * bench/.results/<time>-<scenario>.md and .json (not committed). docs/performance.md says how to
 * read them.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { RESULTS_DIR, ROOT_DIR, compile, describeTree } from './lib/build.js';
import { tryRun } from './lib/proc.js';
import type { Check, Flag, FlagValues, Scenario } from './lib/scenario.js';
import { SCENARIOS } from './scenarios/index.js';

const GLOBAL_FLAGS: Record<string, Flag> = {
  quick: { type: 'boolean', help: 'a smoke run: short rounds, figures meaningless' },
  list: { type: 'boolean', help: 'list the scenarios and their flags' },
  help: { type: 'boolean', help: 'this text, or a scenario’s flags' },
};
/** Whatever happens, stop: the longest scenario takes minutes, not this. */
const ABORT_AFTER_MS = 40 * 60_000;

const t0 = Date.now();
const log = (s: string): void => void process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);

function usage(scenarios: readonly Scenario[]): string {
  const flagLines = (flags: Record<string, Flag> = {}): string =>
    Object.entries(flags)
      .map(([k, f]) => `      ${`--${k}${f.type === 'string' ? ' <value>' : ''}`.padEnd(28)}${f.help}\n`)
      .join('');
  return (
    'npm run bench [-- <scenario>] [--quick] [flags]\n\n' +
    scenarios.map((s) => `  ${s.name.padEnd(14)}${s.headline ? '*' : ' '} ${s.summary}\n${flagLines(s.flags)}`).join('') +
    '\n  * in the headline set (`npm run bench` alone)\n\n' +
    flagLines(GLOBAL_FLAGS)
  );
}

function version(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT_DIR, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

async function machine(): Promise<Record<string, string>> {
  return {
    date: new Date().toISOString(),
    commit: describeTree(),
    cores: `${cpus().length} (${cpus()[0]?.model ?? 'unknown'})`,
    memory: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    kernel: release(),
    node: process.version,
    'http-proxy': version('http-proxy'),
    ioredis: version('ioredis'),
    redis:
      (await tryRun('redis-server', ['--version']))
        .split(' ')
        .find((w) => w.startsWith('v='))
        ?.slice(2) ?? 'unknown',
    wrk: (await tryRun('sh', ['-c', 'wrk -v 2>&1 | head -1'])).split(' ')[1] ?? 'not installed',
  };
}

const verdictLine = (c: Check): string => `- ${c.verdict.padEnd(12)} ${c.target}: ${c.measured}`;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  // The scenario is the first word; what comes before it can only be the global flags (no values).
  const at = argv.findIndex((a) => !a.startsWith('-'));
  const name = at === -1 ? undefined : argv[at]!;
  const one = name === undefined ? undefined : SCENARIOS.find((s) => s.name === name);
  if (name !== undefined && !one) throw new Error(`no scenario "${name}"\n\n${usage(SCENARIOS)}`);
  const options: ParseArgsConfig['options'] = {};
  for (const [k, f] of Object.entries({ ...GLOBAL_FLAGS, ...one?.flags })) options[k] = { type: f.type, ...(f.multiple ? { multiple: true } : {}) };
  let flags: FlagValues;
  try {
    flags = parseArgs({ args: argv.filter((_, i) => i !== at), options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n\n${usage(one ? [one] : SCENARIOS)}`);
  }
  if (flags.list || flags.help) {
    process.stdout.write(usage(one && flags.help ? [one] : SCENARIOS));
    return;
  }
  const quick = flags.quick === true;
  const chosen = one ? [one] : SCENARIOS.filter((s) => s.headline);
  const label = one ? one.name : 'headline';
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  mkdirSync(RESULTS_DIR, { recursive: true });

  log('compiling src/ and bench/ with tsc (bench/tsconfig.bench.json)');
  const typeErrors = compile();
  if (typeErrors) log(`tsc reported type errors (output used anyway):\n${typeErrors}`);
  const info = await machine();
  const command = `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`;
  log(`${quick ? 'QUICK ' : ''}${chosen.map((s) => s.name).join(', ')} on ${info.cores}, Node ${info.node}, ${info.commit}`);

  const sections: string[] = [];
  const all: Array<{ scenario: string; check: Check }> = [];
  const json: Record<string, unknown> = {};
  for (const s of chosen) {
    log(`— ${s.name}`);
    const result = await s.run({
      quick,
      flags,
      log: (line) => log(`${s.name}: ${line}`),
      artifact: (file) => join(RESULTS_DIR, `${stamp}-${file}`),
    });
    const section = `## ${s.name}\n\n${result.report}\n${result.checks.map(verdictLine).join('\n')}\n`;
    process.stdout.write(`\n${section}`);
    sections.push(section);
    for (const check of result.checks) all.push({ scenario: s.name, check });
    json[s.name] = { checks: result.checks, data: result.data };
  }

  const header =
    `# sluice bench: ${label}${quick ? ' (QUICK: smoke figures, not for the targets)' : ''}\n\n\`${command}\`\n\n` +
    Object.entries(info)
      .map(([k, v]) => `- ${k}: ${v}`)
      .join('\n') +
    '\n';
  const summary = chosen.length > 1 ? `\n## Targets\n\n${all.map((x) => verdictLine({ ...x.check, target: `${x.scenario}: ${x.check.target}` })).join('\n')}\n` : '';
  if (summary) process.stdout.write(summary);
  const base = join(RESULTS_DIR, `${stamp}-${label}`);
  writeFileSync(`${base}.md`, `${header}\n${sections.join('\n')}${summary}`);
  writeFileSync(`${base}.json`, JSON.stringify({ command, machine: info, quick, scenarios: json }, null, 2) + '\n');
  log(`wrote ${relative(ROOT_DIR, base)}.md and .json`);
}

setTimeout(() => {
  log(`exceeded ${ABORT_AFTER_MS / 60_000} minutes; aborting`);
  process.exit(1);
}, ABORT_AFTER_MS).unref();

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
