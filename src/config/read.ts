/**
 * Reads the settings of the schema from a parsed config file and the environment: each value from
 * its environment variable when set (non-empty), else from the file, else its default; checked
 * with TypeBox against its own node of the schema. A ConfigError names the key an operator set
 * (the file key path, or the environment variable) and says what the schema wants there.
 */
import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ConfigError } from './error.js';
import { formatOf } from './formats.js';
import { choicesOf, kindOf, NON_EMPTY, nullableOf, propertiesOf, REDACTED, SETTINGS, type Node, type Settings } from './schema.js';

export type Raw = Record<string, unknown>;

export function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What was read, and under which name each setting was given (for messages about several). */
export interface ReadSettings {
  settings: Settings;
  /** The environment variable or file key path a setting came from, by file key path. */
  givenAs: Map<string, string>;
}

const bad = (key: string, what: string): ConfigError => new ConfigError(`config key "${key}" ${what}`);

/** Integers and booleans come as text from the environment (and may from the file). */
function coerce(s: TSchema, v: unknown): unknown {
  const kind = kindOf(s);
  if (kind === 'Integer' && typeof v === 'string' && /^\s*-?\d+\s*$/.test(v)) return Number(v);
  if (kind === 'Boolean' && (v === 'true' || v === 'false')) return v === 'true';
  if (kind === 'Array' && typeof v === 'string' && (s.items as TSchema).format === 'host-port') {
    return v
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  }
  return v;
}

/** The value given, for the message; a secret's is not repeated, of any type (unless a blank string: nothing to hide). */
function got(v: unknown, secret: boolean): string {
  if (!secret || (typeof v === 'string' && v.trim() === '')) return `, got ${JSON.stringify(v)}`;
  return v === null ? ', got null' : `, got ${Array.isArray(v) ? 'a list' : `a ${typeof v}`} (not shown: a secret)`;
}

/**
 * Whether a value is the placeholder a printed effective config shows for a secret (or for a
 * URL's password): a copy of that printout given back without the secret would otherwise run with
 * "[redacted]" as a credential.
 */
function placeholder(v: string): boolean {
  if (v.trim() === REDACTED) return true;
  const at = v.indexOf('@');
  if (at === -1 || !v.includes('://')) return false;
  try {
    return decodeURIComponent(new URL(v).password) === REDACTED;
  } catch {
    return false;
  }
}

/** A value (never undefined) against one node: returns it as the setting holds it, or throws naming `key`. */
function checkValue(s: Node, raw: unknown, key: string, secret: boolean): unknown {
  if (typeof raw === 'string' && placeholder(raw)) {
    throw new ConfigError(`${key} holds "${REDACTED}", the placeholder a printed config shows for a secret: give the secret itself (its environment variable wins over the file)`);
  }
  const inner = raw === null ? null : nullableOf(s);
  const node: Node = inner ?? s;
  const v = coerce(node, raw);
  const kind = kindOf(node);
  if (kind === 'Object') return readObject(node, v, key, secret, null, null);
  if (kind === 'Union' && !choicesOf(node)) {
    // A word or a value (`all`, or a list of ids): the value is checked as its own node.
    const members = node.anyOf as Node[];
    const words = members.filter((m) => kindOf(m) === 'Literal').map((m) => m.const as unknown);
    if (words.includes(v)) return v;
    const value = members.find((m) => kindOf(m) !== 'Literal')!;
    if (typeof v === 'string') throw bad(key, `must be ${words.map((w) => JSON.stringify(w)).join(', ')} or a list of ${value.listOf ?? 'strings'}${got(v, secret)}`);
    return checkValue(value, v, key, secret);
  }
  if (kind === 'Array') {
    const items = node.items as Node;
    if (!Array.isArray(v)) throw bad(key, `must be a list of ${node.listOf ?? s.listOf ?? 'strings'}`);
    if (typeof node.minItems === 'number' && v.length < node.minItems) {
      throw bad(key, `must name at least one ${items.format ? (formatOf(items.format)?.noun ?? 'entry') : 'entry'}`);
    }
    return v.map((x: unknown, i) => checkValue(items, x, `${key}[${i}]`, secret));
  }
  const valid: boolean = Value.Check(node, v);
  if (valid) return v;
  const choices = choicesOf(node);
  if (choices) {
    const list = choices.length === 2 ? `"${choices[0]}" or "${choices[1]}"` : `one of ${choices.join(', ')}`;
    throw bad(key, `must be ${list}${got(v, secret)}`);
  }
  if (kind === 'Integer') throw bad(key, `must be an integer between ${node.minimum} and ${node.maximum}${got(raw, false)}`);
  if (kind === 'Boolean') throw bad(key, `must be true or false${got(raw, false)}`);
  if (kind === 'String') {
    if (typeof v !== 'string' || (node.pattern !== undefined && !new RegExp(node.pattern).test(v))) {
      throw bad(key, `must be a ${node.pattern === NON_EMPTY ? 'non-empty ' : ''}string${got(v, secret)}`);
    }
    if (typeof node.minLength === 'number' && v.length < node.minLength) {
      throw new ConfigError(`${key} must be at least ${node.minLength} characters long`);
    }
    const problem = node.format ? formatOf(node.format)?.problem(v) : null;
    if (problem) throw bad(key, problem);
  }
  throw bad(key, `is not valid${got(v, secret)}`);
}

/**
 * One mapping of the schema at `key` (the file key path; '' at the top). `env` is null inside a
 * list, where no environment variable reaches; `givenAs` records where each value came from.
 */
function readObject(s: Node, v: unknown, key: string, secret: boolean, env: NodeJS.ProcessEnv | null, givenAs: Map<string, string> | null): Raw {
  // A group left out of the file is an empty one; an item of a list must be a mapping.
  if (v === undefined && env !== null) v = {};
  if (!isObject(v)) throw bad(key, 'must be a mapping');
  const props = propertiesOf(s);
  const allowed = props.filter(([, c]) => !c.envOnly).map(([k]) => k);
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k)) throw new ConfigError(`unknown config key "${key ? `${key}.` : ''}${k}" (allowed here: ${allowed.join(', ')})`);
  }
  const out: Raw = {};
  for (const [k, child] of props) {
    const childKey = key ? `${key}.${k}` : k;
    const childSecret = secret || child.secret === true;
    if (kindOf(child) === 'Object') {
      out[k] = readObject(child, v[k], childKey, childSecret, env, givenAs);
      continue;
    }
    const fromEnv = child.env === undefined || env === null || env[child.env] === '' ? undefined : env[child.env];
    const name = fromEnv !== undefined ? child.env! : childKey;
    const raw = fromEnv ?? (child.envOnly ? undefined : v[k]);
    if (raw === undefined) {
      if ('default' in child) {
        out[k] = structuredClone(child.default as unknown);
        continue;
      }
      if (child.env !== undefined) {
        const what = (child.description ?? '').replace(/^./, (c) => c.toLowerCase()).replace(/\.$/, '');
        throw new ConfigError(`${child.env} is required: ${what}`);
      }
    } else {
      givenAs?.set(childKey, name);
    }
    out[k] = checkValue(child, raw, name, childSecret);
  }
  return out;
}

/** A key set to null (YAML `~` or an empty value) means the same as a key left out, at any depth of mappings. */
function withoutNulls(v: Raw): Raw {
  const out: Raw = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = isObject(x) ? withoutNulls(x) : x;
  return out;
}

export function readSettings(file: Raw, env: NodeJS.ProcessEnv): ReadSettings {
  const givenAs = new Map<string, string>();
  const settings = readObject(SETTINGS, withoutNulls(file), '', false, env, givenAs) as Settings;
  return { settings, givenAs };
}
