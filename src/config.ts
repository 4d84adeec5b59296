/**
 * Settings: one schema, from an optional YAML file (`SLUICE_CONFIG`) and the
 * environment (which wins), validated once at start-up. Every message names
 * the offending key so an operator can fix it without reading code.
 */
import { readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { describeRelayDsn, parseRelayDsn, type RelayDsn } from './auth/relay-db/dsn.js';
import { ConfigError } from './errors.js';

export interface IpLimitRule {
  name: string;
  /** Exact paths, or prefixes ending in `*`. First matching rule wins. */
  paths: string[];
  limit: number;
  windowSeconds: number;
  /** Evaluate, count and report, but admit: try a new limit safely. */
  shadow: boolean;
}

export interface FreeTierConfig {
  perMinute: number;
  windowSeconds: number;
  perDay: number;
  timeZone: string;
  /** A model is free when its id ends with this suffix (unless `models` is set). */
  modelSuffix: string;
  /** Explicit list of free model ids; replaces the suffix rule when present. */
  models: string[] | null;
  /** Evaluate, count and report, but admit: try a new limit safely. */
  shadow: boolean;
}

export interface RedisConfig {
  url: string | null;
  /** Prefix of every key and channel (several deployments on one Redis). Must not contain "{". */
  keyPrefix: string;
  /** Bound on one Redis command; past it the call fails and `limits.onStoreError` applies. */
  commandTimeoutMs: number;
  /** Sentinel addresses (host:port); with `sentinelName`, replaces the URL's host. */
  sentinels: string[] | null;
  sentinelName: string | null;
  /** Cluster seed nodes (host:port); the URL then only supplies password and TLS. */
  clusterNodes: string[] | null;
  /**
   * Send the limit decisions of one event-loop turn as one script run (keys of several users in
   * one command). Off for a sharding proxy in front of Redis (Envoy, twemproxy, a sharded
   * managed database), which needs every command's keys on one shard; a Cluster never batches.
   */
  batchDecisions: boolean;
}

/** The relay's own database, where the keys made in its console live (docs/relay-keys.md). */
export interface RelayDbConfig {
  /** Parsed from `SLUICE_RELAY_DB` / `relayDb.url`, in the relay's own `SQL_DSN` forms; null: not used. */
  dsn: RelayDsn | null;
  /** `auto`: new-api or one-api, told from the tables. */
  schema: 'auto' | 'new-api' | 'one-api';
  /** Connections per replica (a sidecar per relay Pod multiplies them). */
  poolSize: number;
  /** Bound on one statement, connecting included. */
  queryTimeoutMs: number;
  /** A key's answer is trusted at most this long: the bound on seeing a console change. */
  recheckSeconds: number;
  /** How long a key seen valid keeps working while the database cannot be reached. */
  staleSeconds: number;
}

/** The public listener's bounds on connections and on how long a client may take to send. */
export interface ServerConfig {
  /**
   * Open client connections at most; more are closed as they arrive. null: derived from the
   * descriptor limit (src/connections.ts), at most DEFAULTS.maxConnections.
   */
  maxConnections: number | null;
  /** A request's headers must be complete this long after its connection opened or went busy; else 408. */
  headersTimeoutSeconds: number;
  /** A whole request (headers and body) must have arrived this long after it began; else 408. */
  requestTimeoutSeconds: number;
  /** An idle keep-alive connection is closed after this long. */
  keepAliveTimeoutSeconds: number;
}

export interface Config {
  upstream: {
    url: URL;
    credential: string | null;
    /** The relay's response headers must arrive this long after forwarding (0: no bound); else 504. */
    headersTimeoutSeconds: number;
  };
  redis: RedisConfig;
  relayDb: RelayDbConfig;
  host: string;
  port: number;
  adminHost: string;
  adminPort: number;
  adminToken: string | null;
  maxBodyBytes: number;
  /** Bytes all request bodies in flight may hold together, raw and decoded; past it 503. */
  bodyBudgetBytes: number;
  /** A compressed body may decode to this many bytes at most; past it 413. */
  maxDecodedBodyBytes: number;
  server: ServerConfig;
  trustedProxies: string[];
  freeTier: FreeTierConfig;
  ipLimits: IpLimitRule[];
  logLevel: string;
  /**
   * Which requests get an access line (at info): every one; only those not admitted in the end
   * (refused, failed, cut by either side) or answered with a status of 400 or more; or none.
   * Hot-reloadable.
   */
  accessLog: AccessLogMode;
  /** On SIGTERM: how long in-flight requests and open streams may take before exit. */
  drainSeconds: number;
  limits: {
    onStoreError: 'open' | 'closed';
    /**
     * How long a replica answers a refused client's further calls from memory, at most, before it
     * asks the store again (0: always ask). Bounds how stale such an answer can be when the store
     * changes behind its back (Redis restarted empty, keys deleted by hand, replicas mid-reload).
     */
    rememberRefusalsSeconds: number;
  };
}

export const DEFAULT_IP_LIMITS: readonly IpLimitRule[] = Object.freeze([
  { name: 'usage-query', paths: ['/api/log/token', '/api/usage/token/'], limit: 20, windowSeconds: 1200, shadow: false },
  { name: 'api-and-dashboard', paths: ['/api/*', '/v1/dashboard/*'], limit: 360, windowSeconds: 180, shadow: false },
]);

export const DEFAULTS = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  adminHost: '0.0.0.0',
  adminPort: 9090,
  maxBodyBytes: 32 * 1024 * 1024,
  bodyBudgetBytes: 64 * 1024 * 1024,
  maxDecodedBodyBytes: 8 * 1024 * 1024,
  maxConnections: 4096,
  headersTimeoutSeconds: 15,
  // Node's own default: a 32 MiB body at about 1 Mbit/s still arrives.
  requestTimeoutSeconds: 300,
  keepAliveTimeoutSeconds: 65,
  upstreamHeadersTimeoutSeconds: 600,
  freeTier: { perMinute: 20, windowSeconds: 60, perDay: 100, timeZone: 'Asia/Shanghai', modelSuffix: '-free', models: null as string[] | null, shadow: false },
  logLevel: 'info',
  accessLog: 'all' as AccessLogMode,
  drainSeconds: 30,
  rememberRefusalsSeconds: 10,
  redisKeyPrefix: 'sluice:',
  redisCommandTimeoutMs: 100,
  relayDb: { schema: 'auto' as RelayDbConfig['schema'], poolSize: 2, queryTimeoutMs: 2000, recheckSeconds: 10, staleSeconds: 900 },
});

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const ACCESS_LOG_MODES = ['all', 'errors', 'off'] as const;
export type AccessLogMode = (typeof ACCESS_LOG_MODES)[number];

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkKeys(obj: Raw, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) {
      throw new ConfigError(`unknown config key "${where}${k}" (allowed here: ${allowed.join(', ')})`);
    }
  }
}

function int(v: unknown, key: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`config key "${key}" must be an integer between ${min} and ${max}, got ${JSON.stringify(v)}`);
  }
  return n;
}

function str(v: unknown, key: string, { allowEmpty = false } = {}): string {
  if (typeof v !== 'string' || (!allowEmpty && v.trim() === '')) {
    throw new ConfigError(`config key "${key}" must be a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

function bool(v: unknown, key: string): boolean {
  if (v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  throw new ConfigError(`config key "${key}" must be true or false, got ${JSON.stringify(v)}`);
}

function hostPorts(v: unknown, key: string): string[] {
  const list = typeof v === 'string' ? v.split(',').map((x) => x.trim()).filter(Boolean) : strList(v, key);
  if (list.length === 0) throw new ConfigError(`config key "${key}" must name at least one host:port`);
  list.forEach((hp, i) => {
    if (!/^[^\s:]+:\d{1,5}$/.test(hp) && !/^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(hp)) {
      throw new ConfigError(`config key "${key}[${i}]" must be host:port, got ${JSON.stringify(hp)}`);
    }
  });
  return list;
}

function strList(v: unknown, key: string): string[] {
  if (!Array.isArray(v)) throw new ConfigError(`config key "${key}" must be a list of strings`);
  return v.map((x, i) => str(x, `${key}[${i}]`));
}

function httpUrl(v: unknown, key: string): URL {
  const s = str(v, key);
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new ConfigError(`config key "${key}" is not a valid URL: ${JSON.stringify(s)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ConfigError(`config key "${key}" must be an http:// or https:// URL, got ${u.protocol}`);
  }
  return u;
}

function redisUrl(v: unknown, key: string): string {
  const s = str(v, key);
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new ConfigError(`config key "${key}" is not a valid URL`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new ConfigError(`config key "${key}" must be a redis:// or rediss:// URL, got ${u.protocol}`);
  }
  return s;
}

function parseCidr(entry: string, key: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const [addr = '', bits] = entry.trim().split('/');
  const fam = isIP(addr);
  if (fam === 0) throw new ConfigError(`config key "${key}" has an invalid address: ${JSON.stringify(entry)}`);
  const max = fam === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (bits !== undefined && !/^\d+$/.test(bits))) {
    throw new ConfigError(`config key "${key}" has an invalid prefix length: ${JSON.stringify(entry)}`);
  }
  return { address: addr, prefix, family: fam === 4 ? 'ipv4' : 'ipv6' };
}

function validTimeZone(tz: string, key: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new ConfigError(`config key "${key}" is not a known IANA time zone: ${JSON.stringify(tz)}`);
  }
  return tz;
}

function freeTier(v: unknown): FreeTierConfig {
  const d = DEFAULTS.freeTier;
  if (v === undefined) return { ...d };
  if (!isObject(v)) throw new ConfigError('config key "freeTier" must be a mapping');
  checkKeys(v, ['perMinute', 'windowSeconds', 'perDay', 'timeZone', 'modelSuffix', 'models', 'shadow'], 'freeTier.');
  if (v.modelSuffix !== undefined && v.models !== undefined) {
    throw new ConfigError('config keys "freeTier.modelSuffix" and "freeTier.models" are exclusive: set one');
  }
  return {
    perMinute: v.perMinute === undefined ? d.perMinute : int(v.perMinute, 'freeTier.perMinute', 1, 1_000_000),
    windowSeconds: v.windowSeconds === undefined ? d.windowSeconds : int(v.windowSeconds, 'freeTier.windowSeconds', 1, 31 * 86400),
    perDay: v.perDay === undefined ? d.perDay : int(v.perDay, 'freeTier.perDay', 1, 100_000_000),
    timeZone: v.timeZone === undefined ? d.timeZone : validTimeZone(str(v.timeZone, 'freeTier.timeZone'), 'freeTier.timeZone'),
    modelSuffix: v.modelSuffix === undefined ? d.modelSuffix : str(v.modelSuffix, 'freeTier.modelSuffix'),
    models: v.models === undefined ? d.models : strList(v.models, 'freeTier.models'),
    shadow: v.shadow === undefined ? d.shadow : bool(v.shadow, 'freeTier.shadow'),
  };
}

function relayDb(v: unknown, envUrl: string | undefined, envSchema: string | undefined): RelayDbConfig {
  const d = DEFAULTS.relayDb;
  const r = v === undefined ? {} : v;
  if (!isObject(r)) throw new ConfigError('config key "relayDb" must be a mapping');
  checkKeys(r, ['url', 'schema', 'poolSize', 'queryTimeoutMs', 'recheckSeconds', 'staleSeconds'], 'relayDb.');
  const urlRaw = envUrl ?? r.url;
  const urlKey = envUrl !== undefined ? 'SLUICE_RELAY_DB' : 'relayDb.url';
  if (urlRaw !== undefined && typeof urlRaw !== 'string') throw new ConfigError(`config key "${urlKey}" must be a string`);
  const schemaKey = envSchema !== undefined ? 'SLUICE_RELAY_DB_SCHEMA' : 'relayDb.schema';
  const schema = envSchema ?? r.schema ?? d.schema;
  if (schema !== 'auto' && schema !== 'new-api' && schema !== 'one-api') {
    throw new ConfigError(`config key "${schemaKey}" must be auto, new-api or one-api, got ${JSON.stringify(schema)}`);
  }
  return {
    dsn: urlRaw === undefined ? null : parseRelayDsn(urlRaw, urlKey),
    schema,
    poolSize: r.poolSize === undefined ? d.poolSize : int(r.poolSize, 'relayDb.poolSize', 1, 32),
    queryTimeoutMs: r.queryTimeoutMs === undefined ? d.queryTimeoutMs : int(r.queryTimeoutMs, 'relayDb.queryTimeoutMs', 50, 60_000),
    recheckSeconds: r.recheckSeconds === undefined ? d.recheckSeconds : int(r.recheckSeconds, 'relayDb.recheckSeconds', 1, 3600),
    staleSeconds: r.staleSeconds === undefined ? d.staleSeconds : int(r.staleSeconds, 'relayDb.staleSeconds', 0, 7 * 86400),
  };
}

function ipLimits(v: unknown): IpLimitRule[] {
  if (v === undefined) return DEFAULT_IP_LIMITS.map((r) => ({ ...r, paths: [...r.paths] }));
  if (!Array.isArray(v)) throw new ConfigError('config key "ipLimits" must be a list of rules');
  const names = new Set<string>();
  return v.map((r: unknown, i) => {
    const at = `ipLimits[${i}]`;
    if (!isObject(r)) throw new ConfigError(`config key "${at}" must be a mapping`);
    checkKeys(r, ['name', 'paths', 'limit', 'windowSeconds', 'shadow'], `${at}.`);
    const name = str(r.name, `${at}.name`);
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new ConfigError(`config key "${at}.name" may hold only letters, digits, "_", "-" and "."`);
    if (names.has(name)) throw new ConfigError(`config key "${at}.name" repeats the rule name "${name}"`);
    names.add(name);
    const paths = strList(r.paths, `${at}.paths`);
    if (paths.length === 0) throw new ConfigError(`config key "${at}.paths" must name at least one path`);
    paths.forEach((p, j) => {
      if (!p.startsWith('/')) throw new ConfigError(`config key "${at}.paths[${j}]" must start with "/"`);
      if (p.indexOf('*') !== -1 && p.indexOf('*') !== p.length - 1) {
        throw new ConfigError(`config key "${at}.paths[${j}]" may hold "*" only at its end (a prefix)`);
      }
    });
    return {
      name,
      paths,
      limit: int(r.limit, `${at}.limit`, 1, 100_000_000),
      windowSeconds: int(r.windowSeconds, `${at}.windowSeconds`, 1, 31 * 86400),
      shadow: r.shadow === undefined ? false : bool(r.shadow, `${at}.shadow`),
    };
  });
}

function serverConfig(v: Raw, maxConnectionsEnv: string | undefined): ServerConfig {
  const maxRaw = maxConnectionsEnv ?? v.maxConnections;
  const c: ServerConfig = {
    maxConnections: maxRaw === undefined ? null : int(maxRaw, maxConnectionsEnv ? 'SLUICE_MAX_CONNECTIONS' : 'server.maxConnections', 1, 1_000_000),
    headersTimeoutSeconds: int(v.headersTimeoutSeconds ?? DEFAULTS.headersTimeoutSeconds, 'server.headersTimeoutSeconds', 1, 3600),
    requestTimeoutSeconds: int(v.requestTimeoutSeconds ?? DEFAULTS.requestTimeoutSeconds, 'server.requestTimeoutSeconds', 1, 86_400),
    keepAliveTimeoutSeconds: int(v.keepAliveTimeoutSeconds ?? DEFAULTS.keepAliveTimeoutSeconds, 'server.keepAliveTimeoutSeconds', 1, 3600),
  };
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (c.headersTimeoutSeconds > c.requestTimeoutSeconds) {
    throw new ConfigError(`config key "server.headersTimeoutSeconds" (${c.headersTimeoutSeconds}) must not exceed "server.requestTimeoutSeconds" (${c.requestTimeoutSeconds})`);
  }
  return c;
}

/** Reads the YAML file named by `SLUICE_CONFIG` (JSON is valid YAML). */
export function readConfigFile(path: string): Raw {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (!isObject(doc)) throw new ConfigError(`config file ${path} must hold a mapping at its top level`);
  return doc;
}

const FILE_KEYS = [
  'upstream',
  'redis',
  'relayDb',
  'host',
  'port',
  'adminHost',
  'adminPort',
  'maxBodyBytes',
  'bodyBudgetBytes',
  'maxDecodedBodyBytes',
  'server',
  'trustedProxies',
  'freeTier',
  'ipLimits',
  'logLevel',
  'accessLog',
  'drainSeconds',
  'limits',
] as const;

export const ENV_VARS = {
  SLUICE_CONFIG: 'path of the YAML/JSON config file',
  SLUICE_UPSTREAM_URL: 'upstream.url',
  SLUICE_UPSTREAM_CREDENTIAL: 'upstream.credential',
  SLUICE_REDIS_URL: 'redis.url',
  SLUICE_REDIS_SENTINELS: 'redis.sentinels (comma-separated host:port)',
  SLUICE_REDIS_SENTINEL_NAME: 'redis.sentinelName',
  SLUICE_REDIS_CLUSTER_NODES: 'redis.clusterNodes (comma-separated host:port)',
  SLUICE_RELAY_DB: "relayDb.url (the relay's SQL_DSN, or sqlite:<path>)",
  SLUICE_RELAY_DB_SCHEMA: 'relayDb.schema (auto, new-api, one-api)',
  SLUICE_DRAIN_SECONDS: 'drainSeconds',
  SLUICE_HOST: 'host',
  SLUICE_PORT: 'port',
  SLUICE_ADMIN_HOST: 'adminHost',
  SLUICE_ADMIN_PORT: 'adminPort',
  SLUICE_ADMIN_TOKEN: 'admin token (environment only)',
  SLUICE_LOG_LEVEL: 'logLevel',
  SLUICE_ACCESS_LOG: 'accessLog',
  SLUICE_MAX_CONNECTIONS: 'server.maxConnections',
} as const;

/**
 * Builds the effective config from a parsed file (may be empty) and the
 * environment. Throws ConfigError naming the bad key.
 */
/** A key set to null (YAML `~` or an empty value) means the same as a key left out, at any depth. */
function withoutNulls(v: Raw): Raw {
  const out: Raw = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = isObject(x) ? withoutNulls(x) : x;
  return out;
}

export function buildConfig(rawFile: Raw, env: NodeJS.ProcessEnv): Config {
  const file = withoutNulls(rawFile);
  checkKeys(file, FILE_KEYS, '');
  const up = file.upstream === undefined ? {} : file.upstream;
  if (!isObject(up)) throw new ConfigError('config key "upstream" must be a mapping');
  checkKeys(up, ['url', 'credential', 'headersTimeoutSeconds'], 'upstream.');
  const srv = file.server === undefined ? {} : file.server;
  if (!isObject(srv)) throw new ConfigError('config key "server" must be a mapping');
  checkKeys(srv, ['maxConnections', 'headersTimeoutSeconds', 'requestTimeoutSeconds', 'keepAliveTimeoutSeconds'], 'server.');
  const rd = file.redis === undefined ? {} : file.redis;
  if (!isObject(rd)) throw new ConfigError('config key "redis" must be a mapping');
  checkKeys(rd, ['url', 'keyPrefix', 'commandTimeoutMs', 'sentinels', 'sentinelName', 'clusterNodes', 'batchDecisions'], 'redis.');
  const lim = file.limits === undefined ? {} : file.limits;
  if (!isObject(lim)) throw new ConfigError('config key "limits" must be a mapping');
  checkKeys(lim, ['onStoreError', 'rememberRefusalsSeconds'], 'limits.');
  const onStoreError = lim.onStoreError ?? 'open';
  if (onStoreError !== 'open' && onStoreError !== 'closed') {
    throw new ConfigError(`config key "limits.onStoreError" must be "open" or "closed", got ${JSON.stringify(onStoreError)}`);
  }

  const e = (name: keyof typeof ENV_VARS): string | undefined => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };

  const upstreamRaw = e('SLUICE_UPSTREAM_URL') ?? up.url;
  if (upstreamRaw === undefined) {
    throw new ConfigError('SLUICE_UPSTREAM_URL is required: the base URL of the relay sluice fronts (e.g. http://127.0.0.1:3000)');
  }
  const upstreamKey = e('SLUICE_UPSTREAM_URL') ? 'SLUICE_UPSTREAM_URL' : 'upstream.url';
  const credRaw = e('SLUICE_UPSTREAM_CREDENTIAL') ?? up.credential;
  const redisRaw = e('SLUICE_REDIS_URL') ?? rd.url;
  const trusted = file.trustedProxies === undefined ? [] : strList(file.trustedProxies, 'trustedProxies');
  trusted.forEach((t, i) => parseCidr(t, `trustedProxies[${i}]`));
  const logLevel = str(e('SLUICE_LOG_LEVEL') ?? file.logLevel ?? DEFAULTS.logLevel, 'logLevel');
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`config key "logLevel" must be one of ${LOG_LEVELS.join(', ')}`);
  const accessLogKey = e('SLUICE_ACCESS_LOG') ? 'SLUICE_ACCESS_LOG' : 'accessLog';
  const accessLog = str(e('SLUICE_ACCESS_LOG') ?? file.accessLog ?? DEFAULTS.accessLog, accessLogKey);
  if (!(ACCESS_LOG_MODES as readonly string[]).includes(accessLog)) {
    throw new ConfigError(`config key "${accessLogKey}" must be one of ${ACCESS_LOG_MODES.join(', ')}, got ${JSON.stringify(accessLog)}`);
  }

  const sentinelsRaw = e('SLUICE_REDIS_SENTINELS') ?? rd.sentinels;
  const sentinelNameRaw = e('SLUICE_REDIS_SENTINEL_NAME') ?? rd.sentinelName;
  const clusterRaw = e('SLUICE_REDIS_CLUSTER_NODES') ?? rd.clusterNodes;
  const redis: RedisConfig = {
    url: redisRaw === undefined ? null : redisUrl(redisRaw, e('SLUICE_REDIS_URL') ? 'SLUICE_REDIS_URL' : 'redis.url'),
    keyPrefix: rd.keyPrefix === undefined ? DEFAULTS.redisKeyPrefix : str(rd.keyPrefix, 'redis.keyPrefix'),
    commandTimeoutMs: rd.commandTimeoutMs === undefined ? DEFAULTS.redisCommandTimeoutMs : int(rd.commandTimeoutMs, 'redis.commandTimeoutMs', 5, 60_000),
    sentinels: sentinelsRaw === undefined ? null : hostPorts(sentinelsRaw, 'redis.sentinels'),
    sentinelName: sentinelNameRaw === undefined ? null : str(sentinelNameRaw, 'redis.sentinelName'),
    clusterNodes: clusterRaw === undefined ? null : hostPorts(clusterRaw, 'redis.clusterNodes'),
    batchDecisions: rd.batchDecisions === undefined ? true : bool(rd.batchDecisions, 'redis.batchDecisions'),
  };
  if (redis.keyPrefix.includes('{') || redis.keyPrefix.includes('}')) {
    throw new ConfigError('config key "redis.keyPrefix" must not contain "{" or "}" (they would break Cluster hash tags)');
  }
  if (redis.sentinels && !redis.sentinelName) throw new ConfigError('config key "redis.sentinelName" is required with "redis.sentinels"');
  if (redis.sentinels && redis.clusterNodes) throw new ConfigError('config keys "redis.sentinels" and "redis.clusterNodes" are exclusive');
  if ((redis.sentinels || redis.clusterNodes) && redisRaw === undefined) {
    throw new ConfigError('SLUICE_REDIS_URL (or redis.url) is required with Sentinel or Cluster: it supplies the password, TLS (rediss://) and database');
  }

  const cfg: Config = {
    relayDb: relayDb(file.relayDb, e('SLUICE_RELAY_DB'), e('SLUICE_RELAY_DB_SCHEMA')),
    upstream: {
      url: httpUrl(upstreamRaw, upstreamKey),
      credential: credRaw === undefined ? null : str(credRaw, 'upstream.credential'),
      headersTimeoutSeconds: int(up.headersTimeoutSeconds ?? DEFAULTS.upstreamHeadersTimeoutSeconds, 'upstream.headersTimeoutSeconds', 0, 86_400),
    },
    redis,
    host: str(e('SLUICE_HOST') ?? file.host ?? DEFAULTS.host, 'host'),
    port: int(e('SLUICE_PORT') ?? file.port ?? DEFAULTS.port, e('SLUICE_PORT') ? 'SLUICE_PORT' : 'port', 0, 65535),
    adminHost: str(e('SLUICE_ADMIN_HOST') ?? file.adminHost ?? DEFAULTS.adminHost, 'adminHost'),
    adminPort: int(e('SLUICE_ADMIN_PORT') ?? file.adminPort ?? DEFAULTS.adminPort, e('SLUICE_ADMIN_PORT') ? 'SLUICE_ADMIN_PORT' : 'adminPort', 0, 65535),
    adminToken: e('SLUICE_ADMIN_TOKEN') ?? null,
    maxBodyBytes: file.maxBodyBytes === undefined ? DEFAULTS.maxBodyBytes : int(file.maxBodyBytes, 'maxBodyBytes', 1, 2 ** 31 - 1),
    bodyBudgetBytes: int(file.bodyBudgetBytes ?? DEFAULTS.bodyBudgetBytes, 'bodyBudgetBytes', 1, 2 ** 40),
    maxDecodedBodyBytes: int(file.maxDecodedBodyBytes ?? DEFAULTS.maxDecodedBodyBytes, 'maxDecodedBodyBytes', 1, 2 ** 31 - 1),
    server: serverConfig(srv, e('SLUICE_MAX_CONNECTIONS')),
    trustedProxies: trusted,
    freeTier: freeTier(file.freeTier),
    ipLimits: ipLimits(file.ipLimits),
    logLevel,
    accessLog: accessLog as AccessLogMode,
    drainSeconds: int(e('SLUICE_DRAIN_SECONDS') ?? file.drainSeconds ?? DEFAULTS.drainSeconds, e('SLUICE_DRAIN_SECONDS') ? 'SLUICE_DRAIN_SECONDS' : 'drainSeconds', 0, 3600),
    limits: { onStoreError, rememberRefusalsSeconds: int(lim.rememberRefusalsSeconds ?? DEFAULTS.rememberRefusalsSeconds, 'limits.rememberRefusalsSeconds', 0, 3600) },
  };
  if (cfg.bodyBudgetBytes < cfg.maxBodyBytes) {
    throw new ConfigError(`config key "bodyBudgetBytes" (${cfg.bodyBudgetBytes}) must be at least "maxBodyBytes" (${cfg.maxBodyBytes}), or a body of the allowed size could never be read`);
  }
  if (cfg.bodyBudgetBytes < cfg.maxDecodedBodyBytes) {
    throw new ConfigError(`config key "bodyBudgetBytes" (${cfg.bodyBudgetBytes}) must be at least "maxDecodedBodyBytes" (${cfg.maxDecodedBodyBytes})`);
  }
  if (cfg.adminToken !== null && cfg.adminToken.length < 16) {
    throw new ConfigError('SLUICE_ADMIN_TOKEN must be at least 16 characters long');
  }
  return cfg;
}

/** Loads the config the way `npm start` does. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const path = env.SLUICE_CONFIG;
  const file = path ? readConfigFile(path) : {};
  return buildConfig(file, env);
}

/** The effective config with secrets removed, for logs and the admin API. */
export function publicConfig(cfg: Config): Record<string, unknown> {
  return {
    ...cfg,
    upstream: { ...cfg.upstream, url: redactUrl(cfg.upstream.url.href), credential: cfg.upstream.credential ? '[set]' : null },
    redis: { ...cfg.redis, url: cfg.redis.url ? redactUrl(cfg.redis.url) : null },
    relayDb: { ...cfg.relayDb, dsn: cfg.relayDb.dsn ? describeRelayDsn(cfg.relayDb.dsn) : null },
    adminToken: cfg.adminToken ? '[set]' : null,
  };
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
    const { address, prefix, family } = parseCidr(c, `trustedProxies[${i}]`);
    list.addSubnet(address, prefix, family);
  });
  return list;
}
