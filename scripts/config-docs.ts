/**
 * Writes the settings table and the rules between settings of docs/configuration.md from the
 * schema (src/config/schema.ts):
 * `npm run docs:config`. Only the part between the two markers is generated; the prose and the
 * example file around it are written by hand. `--check` changes nothing and exits 1 when the
 * page is stale; src/config/index.test.ts fails in that case too.
 *
 * A tool of the repository, not of the product: it is not compiled into dist/ nor the image.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { TSchema } from '@sinclair/typebox';
import { formatOf } from '../src/config/formats.js';
import { choicesOf, kindOf, nullableOf, propertiesOf, RULES, SETTING_LIST, type Node, type SettingEntry } from '../src/config/schema.js';

export const DOC_PATH = new URL('../docs/configuration.md', import.meta.url);
const BEGIN = '<!-- settings: generated from src/config/schema.ts by `npm run docs:config`; do not edit by hand -->';
const END = '<!-- end of generated settings -->';

const code = (v: string): string => `\`${v}\``;
const cell = (v: string): string => v.replace(/\|/g, '\\|');

function mib(n: number): string {
  return n >= 1024 * 1024 && n % (1024 * 1024) === 0 ? ` (${n / (1024 * 1024)} MiB)` : '';
}

function typeOf(s: TSchema): string {
  const v = nullableOf(s) ?? s;
  if (choicesOf(v)) return 'one of';
  const kind = kindOf(v);
  // A word or a value (`all`, or a list): each member named.
  if (kind === 'Union') return (v.anyOf as TSchema[]).map((m) => (kindOf(m) === 'Literal' ? code(String(m.const)) : typeOf(m))).join(' or ');
  if (kind === 'Array') {
    const items = v.items as Node;
    if (kindOf(items) === 'Object') return 'list of rules';
    if (kindOf(items) === 'Integer') return 'list of integers';
    return items.format === 'host-port' ? 'list of host:port' : 'list of strings';
  }
  return kind.toLowerCase();
}

function rangeOf(s: TSchema): string {
  const v = nullableOf(s) ?? s;
  const choices = choicesOf(v);
  if (choices) return choices.map(code).join(', ');
  const kind = kindOf(v);
  if (kind === 'Integer') return `${v.minimum} – ${v.maximum}`;
  if (kind === 'Union')
    return (v.anyOf as TSchema[])
      .filter((m) => kindOf(m) !== 'Literal')
      .map(rangeOf)
      .join('; ');
  if (kind === 'Array' && kindOf(v.items as Node) === 'Integer') return `each ${rangeOf(v.items as Node)}`;
  const parts: string[] = [];
  const str = kind === 'Array' ? (v.items as Node) : v;
  if (kind === 'Array' && typeof v.minItems === 'number') parts.push(`at least ${v.minItems}`);
  if (kindOf(str) === 'String') {
    if (str.format) parts.push(formatOf(str.format as string)?.doc ?? String(str.format));
    else if (str.pattern) parts.push('non-empty');
    if (typeof str.minLength === 'number') parts.push(`at least ${str.minLength} characters`);
  }
  return parts.join('; ');
}

function defaultOf(s: Node): string {
  if (!('default' in s)) return 'required';
  const d: unknown = s.default;
  if (d === null) return 'unset';
  if (typeof d === 'number') return `${code(String(d))}${mib(d)}`;
  if (typeof d === 'string' || typeof d === 'boolean') return code(String(d));
  if (Array.isArray(d) && d.length > 0 && typeof d[0] === 'object') return `${d.length} rules (see the example)`;
  return code(JSON.stringify(d));
}

function row(key: string, s: Node, e: Pick<SettingEntry, 'startupOnly' | 'secret'>): string {
  const cols = [
    code(key) + (s.envOnly ? ' (environment only)' : ''),
    s.env ? code(s.env) : '',
    typeOf(s),
    defaultOf(s),
    rangeOf(s),
    e.startupOnly ? 'start-up only' : 'yes',
    e.secret ? 'yes' : '',
    s.description ?? '',
  ];
  return `| ${cols.map(cell).join(' | ')} |`;
}

/** The generated part: one row per setting, in the schema's order, the fields of a list's rules below it. */
export function settingsTable(): string {
  const lines = ['| Key | Environment | Type | Default | Range | Reloadable | Secret | Description |', '|---|---|---|---|---|---|---|---|'];
  for (const e of SETTING_LIST) {
    lines.push(row(e.path, e.schema, e));
    const v = nullableOf(e.schema) ?? e.schema;
    if (kindOf(v) === 'Array' && kindOf(v.items as Node) === 'Object') {
      for (const [k, field] of propertiesOf(v.items as Node)) lines.push(row(`${e.path}[].${k}`, field, e));
    }
  }
  return lines.join('\n');
}

/** The rules between settings, one line each. */
export function rulesList(): string {
  return ['### Rules between settings', '', ...RULES.map((r) => `- ${r.doc}`)].join('\n');
}

/** The page with its generated part brought up to date. */
export function renderDoc(page: string): string {
  const a = page.indexOf(BEGIN);
  const b = page.indexOf(END);
  if (a === -1 || b < a) throw new Error(`docs/configuration.md must hold the markers\n${BEGIN}\n${END}`);
  return `${page.slice(0, a)}${BEGIN}\n\n${settingsTable()}\n\n${rulesList()}\n\n${page.slice(b)}`;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const page = readFileSync(DOC_PATH, 'utf8');
  const next = renderDoc(page);
  if (process.argv.includes('--check')) {
    if (next !== page) {
      process.stderr.write('docs/configuration.md is stale: run npm run docs:config\n');
      process.exit(1);
    }
  } else if (next !== page) {
    writeFileSync(DOC_PATH, next);
    process.stdout.write('docs/configuration.md: settings table regenerated\n');
  }
}
