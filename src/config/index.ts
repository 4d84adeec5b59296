/**
 * Settings: from an optional YAML file (`SLUICE_CONFIG`) and the environment (which wins),
 * validated once at start-up and on each reload. What each setting is (type, default, range,
 * variable, reloadability, secrecy), and the rules between settings, are owned by the schema in
 * src/config/schema.ts; here the file is read and the effective config the rest of sluice reads is
 * built. Every message names
 * the offending key so an operator can fix it without reading code.
 */
import { BlockList } from 'node:net';
import { parseRelayDsn, type RelayDsn } from '../auth/relay-db/dsn.js';
import { FORMATS, parseCidr } from './formats.js';
import { readConfigBytesSync } from './file.js';
import { isObject, readSettings, type Raw } from './read.js';
import { parseConfigText } from './yaml.js';
import { REDACTED, RULES, SECRETS, type Settings } from './schema.js';
import { ConfigError } from './error.js';

export { DEFAULT_IP_LIMITS, DEFAULTS, ENV_VARS, MAX_CONNECTIONS_CAP } from './schema.js';

export type IpLimitRule = Settings['ipLimits'][number];
export type FreeTierConfig = Settings['freeTier'];
export type RedisConfig = Settings['redis'];
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
 * The upstream a config built by the command line holds when none was given (only the sidecar
 * needs one): never contacted, and shown as null by publicConfig.
 */
const NO_UPSTREAM = 'http://upstream-not-set.invalid/';

/**
 * The config as the command line reads it (`sluice keys ...`, `sluice config check`): as
 * buildConfig, but `upstream.url`, which only the sidecar needs, may be missing from both the file
 * and the environment.
 */
export function buildToolConfig(rawFile: Raw, env: NodeJS.ProcessEnv): Config {
  const fileUpstream = rawFile.upstream;
  const given = (env.SLUICE_UPSTREAM_URL ?? '') !== '' || (isObject(fileUpstream) && fileUpstream.url != null);
  if (given || (fileUpstream != null && !isObject(fileUpstream))) return buildConfig(rawFile, env);
  return buildConfig({ ...rawFile, upstream: { ...(fileUpstream ?? {}), url: NO_UPSTREAM } }, env);
}

/** loadConfig for the command line (buildToolConfig). */
export function loadToolConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const path = env.SLUICE_CONFIG;
  return buildToolConfig(path ? readConfigFile(path) : {}, env);
}

/** Whether a config names its upstream (one from buildToolConfig may not). */
export function upstreamSet(cfg: Config): boolean {
  return cfg.upstream.url.href !== NO_UPSTREAM;
}

/**
 * The effective config as a config file would give it, for the admin API, `sluice config check`
 * and the reload log line: every key of the file (`relayDb.url`, not the parsed address), a set
 * secret as "[redacted]" and an unset one as null (the upstream URL holds no user or password), and no
 * upstream when none was given (null). Saved as a file, with the secrets given again (their
 * environment variables win over the file), it is accepted and gives the same config. The admin
 * token, set through the environment only, is not a key of the file: it is not shown.
 */
export function publicConfig(cfg: Config): Record<string, unknown> {
  const { relayDb, adminToken: _environmentOnly, ...rest } = cfg;
  const { dsn, ...relayDbRest } = relayDb;
  const out: Record<string, unknown> = {
    ...rest,
    upstream: { ...cfg.upstream, url: upstreamSet(cfg) ? cfg.upstream.url.href : null },
    relayDb: { url: dsn, ...relayDbRest },
    // A list of free models replaces the suffix rule, and a file may name only one of the two.
    freeTier: cfg.freeTier.models === null ? cfg.freeTier : { ...cfg.freeTier, modelSuffix: null },
  };
  for (const secret of SECRETS) {
    if (secret.schema.envOnly) continue;
    const keys = secret.path.split('.');
    const last = keys.pop()!;
    let parent = out;
    for (const k of keys) parent = parent[k] = { ...(parent[k] as Record<string, unknown>) };
    parent[last] = parent[last] === null || parent[last] === undefined ? null : REDACTED;
  }
  return out;
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
