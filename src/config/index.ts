/**
 * Settings: from an optional YAML file (`SLUICE_CONFIG`) and the environment (which wins),
 * validated once at start-up and on each reload. What each setting is (type, default, range,
 * variable, reloadability, secrecy), and the rules between settings, are owned by the schema in
 * src/config/schema.ts; here the file is read and the effective config the rest of sluice reads is
 * built. Every message names
 * the offending key so an operator can fix it without reading code.
 */
import { BlockList } from 'node:net';
import { describeRelayDsn, parseRelayDsn, type RelayDsn } from '../auth/relay-db/dsn.js';
import { FORMATS, parseCidr } from './formats.js';
import { readConfigBytesSync } from './file.js';
import { readSettings, type Raw } from './read.js';
import { parseConfigText } from './yaml.js';
import { RULES, SECRETS, type Settings } from './schema.js';
import { ConfigError } from '../answers/errors.js';

export { DEFAULT_IP_LIMITS, DEFAULTS, ENV_VARS, MAX_CONNECTIONS_CAP } from './schema.js';

export type IpLimitRule = Settings['ipLimits'][number];
export type FreeTierConfig = Settings['freeTier'];
export type RedisConfig = Settings['redis'];
export type ServerConfig = Settings['server'];
export type AccessLogMode = Settings['accessLog'];
/** The bounds on what a flood of wrong keys may cost the key stores. */
export type AuthConfig = Settings['auth'];
/** The relay's own database, where the keys made in its console live (docs/relay-keys.md). */
export type RelayDbConfig = Omit<Settings['relayDb'], 'url'> & {
  /** Parsed from `SLUICE_RELAY_DB` / `relayDb.url`, in the relay's own `SQL_DSN` forms; null: not used. */
  dsn: RelayDsn | null;
};

/** The effective config: the settings of the schema, with the relay's URL and database address parsed. */
export type Config = Omit<Settings, 'upstream' | 'relayDb'> & {
  upstream: Omit<Settings['upstream'], 'url'> & { url: URL };
  relayDb: RelayDbConfig;
};

/**
 * Reads the YAML file named by `SLUICE_CONFIG` (JSON is valid YAML), at start-up: only a regular
 * file of at most 1 MiB (file.ts), parsed on the calling thread (yaml.ts).
 */
export function readConfigFile(path: string): Raw {
  return parseConfigText(path, readConfigBytesSync(path).toString('utf8'));
}

/**
 * Builds the effective config from a parsed file (may be empty) and the environment. Throws
 * ConfigError naming the bad key.
 */
export function buildConfig(rawFile: Raw, env: NodeJS.ProcessEnv): Config {
  const { settings: s, givenAs } = readSettings(rawFile, env);
  const named = (path: string): string => givenAs.get(path) ?? path;

  for (const rule of RULES) {
    const problem = rule.problem(s, rawFile);
    if (problem !== null) throw new ConfigError(problem);
  }

  const { url: dsnText, ...relayDb } = s.relayDb;
  return {
    ...s,
    upstream: { ...s.upstream, url: new URL(s.upstream.url) },
    relayDb: { dsn: dsnText === null ? null : parseRelayDsn(dsnText, named('relayDb.url')), ...relayDb },
  };
}

/** Loads the config the way `npm start` does. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const path = env.SLUICE_CONFIG;
  const file = path ? readConfigFile(path) : {};
  return buildConfig(file, env);
}

/**
 * The effective config with secrets removed, for logs and the admin API: a secret shows as
 * "[set]", an address without its password (the relay's URL too, which may carry one).
 */
export function publicConfig(cfg: Config): Record<string, unknown> {
  const out: Record<string, unknown> = { ...cfg, upstream: { ...cfg.upstream, url: redactUrl(cfg.upstream.url.href) } };
  for (const secret of SECRETS) {
    const keys = secret.configPath.split('.');
    const last = keys.pop()!;
    let parent = out;
    for (const k of keys) parent = parent[k] = { ...(parent[k] as Record<string, unknown>) };
    const v = parent[last];
    // An address keeps its host, so an operator can tell where it points.
    if (v === null || v === undefined) parent[last] = null;
    else if (secret.schema.configKey !== undefined) parent[last] = describeRelayDsn(v as RelayDsn);
    else if (secret.format?.endsWith('-url')) parent[last] = redactUrl(String(v));
    else parent[last] = '[set]';
  }
  return out;
}

function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.href;
  } catch {
    return '[invalid url]';
  }
}

export function trustedProxyList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  cidrs.forEach((c, i) => {
    const cidr = parseCidr(c);
    if (typeof cidr === 'string') throw new ConfigError(`config key "trustedProxies[${i}]" ${FORMATS.cidr.problem(c)}`);
    list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  });
  return list;
}
