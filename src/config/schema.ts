/**
 * Every setting, once: its type, default, range or format, environment variable, whether a reload
 * of the config file changes it, whether it is a secret, and what it does. The loader
 * (src/config/index.ts), the reload policy (src/config/reload.ts), log redaction (src/log/index.ts) and
 * docs/configuration.md (`npm run docs:config`) all read this one schema.
 *
 * The schema is TypeBox, so each node is plain JSON Schema; what JSON Schema has no word for is
 * kept beside it in the node (`env`, `startupOnly`, `secret`, `envOnly`, `configKey`, `listOf`).
 */
import { Kind, Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FormatName } from './formats.js';

/** What this project adds to a JSON Schema node. */
export interface Meta {
  description: string;
  /** The environment variable that sets it; it wins over the file. */
  env?: string;
  /** Read at start-up only: a reload keeps the running value (on an object: all of it, as one). */
  startupOnly?: true;
  /** Never shown: the effective config and the logs say "[redacted]" when it is set (null when not). */
  secret?: true;
  /** Set through the environment only; not a key of the file. */
  envOnly?: true;
  /** Held parsed under this name in the effective config (`relayDb.url` becomes `relayDb.dsn`). */
  configKey?: string;
  /** What a list holds, for "must be a list of <listOf>" (strings unless said). */
  listOf?: string;
}

/** A string must hold something besides blanks. */
export const NON_EMPTY = '\\S';

type Fmt = { format?: FormatName };

const int = (minimum: number, maximum: number, dflt: number, m: Meta) => Type.Integer({ minimum, maximum, default: dflt, ...m });
const intOrNull = (minimum: number, maximum: number, m: Meta) => Type.Union([Type.Integer({ minimum, maximum }), Type.Null()], { default: null, ...m });
const text = (dflt: string, m: Meta & Fmt) => Type.String({ pattern: NON_EMPTY, default: dflt, ...m });
const textOrNull = ({ format, ...m }: Meta & Fmt) => Type.Union([Type.String({ pattern: NON_EMPTY, ...(format ? { format } : {}) }), Type.Null()], { default: null, ...m });
const flag = (dflt: boolean, m: Meta) => Type.Boolean({ default: dflt, ...m });
const hostPorts = (m: Meta) => Type.Union([Type.Array(Type.String({ pattern: NON_EMPTY, format: 'host-port' }), { minItems: 1 }), Type.Null()], { default: null, ...m });

const DAY = 86_400;
/** The longest window a limit may have (free tier, per-IP rules). */
export const MAX_WINDOW_SECONDS = 31 * DAY;

const ipLimitRule = Type.Object({
  name: Type.String({ pattern: NON_EMPTY, format: 'rule-name', description: 'Named in metrics and logs; unique.' }),
  paths: Type.Array(Type.String({ pattern: NON_EMPTY, format: 'limit-path' }), { minItems: 1, description: 'Exact paths, or prefixes ending in `*`.' }),
  limit: Type.Integer({ minimum: 1, maximum: 100_000_000, description: 'Admitted calls per address...' }),
  windowSeconds: Type.Integer({ minimum: 1, maximum: MAX_WINDOW_SECONDS, description: '...in any window of this many seconds.' }),
  shadow: flag(false, { description: 'Evaluate, count and report, but admit: try a new limit safely.' }),
});

export const DEFAULT_IP_LIMITS: ReadonlyArray<Static<typeof ipLimitRule>> = Object.freeze([
  { name: 'usage-query', paths: ['/api/log/token', '/api/usage/token/'], limit: 20, windowSeconds: 1200, shadow: false },
  // The relay serves /v1/dashboard/billing/* at /dashboard/billing/* as well (router/dashboard.go).
  { name: 'api-and-dashboard', paths: ['/api/*', '/v1/dashboard/*', '/dashboard/billing/*'], limit: 360, windowSeconds: 180, shadow: false },
]);

/** server.maxConnections when unset: this many, or fewer if the descriptor limit leaves room for fewer. */
export const MAX_CONNECTIONS_CAP = 4096;

export const SETTINGS = Type.Object({
  upstream: Type.Object(
    {
      url: Type.String({
        pattern: NON_EMPTY,
        format: 'http-url',
        env: 'SLUICE_UPSTREAM_URL',
        startupOnly: true,
        description: 'The base URL of the relay sluice fronts (e.g. `http://127.0.0.1:3000`): scheme, host, port and path; a user, password, query or fragment is refused.',
      }),
      credential: textOrNull({
        env: 'SLUICE_UPSTREAM_CREDENTIAL',
        secret: true,
        description:
          "A token the relay issued, sent to it as `Authorization: Bearer <credential>` in place of a key from sluice's own registry, which the relay does not know (unset: the registry key itself). Keys from the relay's database always reach the relay as the client sent them.",
      }),
      headersTimeoutSeconds: int(0, DAY, 600, { description: "The relay's response headers must arrive this long after forwarding, else 504 (0: no bound)." }),
      idleTimeoutSeconds: int(0, DAY, 600, {
        description:
          "Once the relay's answer is under way, this long with no byte from the relay and no room freed by the client cuts it: both connections are closed (outcome `answer_stalled`; 0: no bound). A WebSocket session is cut after this long with no byte either way. A reload's new bound applies to answers under way, but a bound set where there was none (0) only to answers that start after it.",
      }),
    },
    { description: 'The relay sluice fronts.' },
  ),
  redis: Type.Object(
    {
      url: textOrNull({
        format: 'redis-url',
        env: 'SLUICE_REDIS_URL',
        secret: true,
        description: 'The shared store (password, TLS with rediss://, database). Unset: an embedded store, each replica counting on its own.',
      }),
      keyPrefix: text('sluice:', { format: 'key-prefix', description: 'Prefix of every key and channel (several deployments on one Redis).' }),
      commandTimeoutMs: int(5, 60_000, 100, { description: 'Bound on one Redis command; past it the call fails and `limits.onStoreError` applies.' }),
      sentinels: hostPorts({
        env: 'SLUICE_REDIS_SENTINELS',
        description: "Sentinel addresses; with `redis.sentinelName`, replaces the URL's host (which still supplies password, TLS and database).",
      }),
      sentinelName: textOrNull({ env: 'SLUICE_REDIS_SENTINEL_NAME', description: 'Sentinel master name; required with `redis.sentinels`.' }),
      clusterNodes: hostPorts({ env: 'SLUICE_REDIS_CLUSTER_NODES', description: 'Redis Cluster seed nodes; the URL then only supplies password and TLS.' }),
      batchDecisions: flag(true, {
        description:
          "Send the limit decisions of one event-loop turn as one script run. Off behind a sharding proxy (Envoy, twemproxy, a sharded managed database), which needs every command's keys on one shard; a Cluster never batches.",
      }),
    },
    { startupOnly: true, description: 'The shared store of limit counters and keys.' },
  ),
  relayDb: Type.Object(
    {
      // No NON_EMPTY pattern: the address parser says what is wrong, without repeating the value.
      url: Type.Union([Type.String(), Type.Null()], {
        default: null,
        env: 'SLUICE_RELAY_DB',
        secret: true,
        configKey: 'dsn',
        description:
          "The relay's database, where the keys made in its console live, in the relay's own `SQL_DSN` form (or `sqlite:<path>`); see docs/relay-keys.md. Unset: not used.",
      }),
      schema: Type.Union([Type.Literal('auto'), Type.Literal('new-api'), Type.Literal('one-api')], {
        default: 'auto',
        env: 'SLUICE_RELAY_DB_SCHEMA',
        description: '`auto`: new-api or one-api, told from the tables.',
      }),
      poolSize: int(1, 32, 2, { description: 'Connections per replica (a sidecar per relay Pod multiplies them).' }),
      queryTimeoutMs: int(50, 60_000, 2000, {
        description: 'Bound on one lookup, a free connection and connecting included; the database itself ends a statement that passes it.',
      }),
      recheckSeconds: int(1, 3600, 10, { description: "A key's answer is trusted at most this long: the bound on seeing a console change." }),
      staleSeconds: int(0, 7 * DAY, 900, { description: 'How long a key seen valid keeps working while the database cannot be reached.' }),
    },
    { startupOnly: true, description: "The relay's own database (docs/relay-keys.md)." },
  ),
  auth: Type.Object(
    {
      failuresPerAddress: int(0, 1_000_000, 20, {
        description:
          "Key lookups a client address may have end without a valid key, per replica, before its keys the replica does not know get 401 from memory with no lookup; refilled evenly over `auth.failureWindowSeconds` (0: no budget). Keys the replica knows still pass. Only with Redis or the relay's database (a lookup in the embedded store costs nothing).",
      }),
      failureWindowSeconds: int(1, DAY, 60, { description: '...the budget refills in full over this many seconds.' }),
      maxAddresses: int(1, 10_000_000, 20_000, { description: 'Addresses whose failures a replica keeps at most; the one longest untouched is forgotten first.' }),
      unknownKeyLookupsPerSecond: int(0, 1_000_000, 20, {
        description:
          'Per replica: lookups of keys it does not know that may end without a valid key, per second; past it such a key gets 503 `store_unavailable` with Retry-After (it may be a valid new key). Lookups in flight count; one that finds a valid key gives its place back (0: no ceiling).',
      }),
      unknownKeyLookupBurst: int(1, 1_000_000, 500, {
        description:
          "...and at most this many at once (one relay-database statement holds up to 500 keys). Lookups in flight hold a place, valid keys too: a new replica meeting its clients' keys all at once needs room here. Also the most requests that may wait for their address's lookups in flight (`auth.failuresPerAddress`); past it, 503 with Retry-After: 1.",
      }),
    },
    { description: 'What a flood of wrong keys may cost the key stores (docs/authentication.md).' },
  ),
  host: text('0.0.0.0', { env: 'SLUICE_HOST', startupOnly: true, description: 'Address of the public listener.' }),
  port: int(0, 65535, 8080, { env: 'SLUICE_PORT', startupOnly: true, description: 'Port of the public listener.' }),
  adminHost: text('0.0.0.0', {
    env: 'SLUICE_ADMIN_HOST',
    startupOnly: true,
    description: 'Address of the admin listener (probes, /metrics, admin API); keep it cluster-internal.',
  }),
  adminPort: int(0, 65535, 9090, { env: 'SLUICE_ADMIN_PORT', startupOnly: true, description: 'Port of the admin listener.' }),
  adminToken: Type.Union([Type.String({ minLength: 16 }), Type.Null()], {
    default: null,
    env: 'SLUICE_ADMIN_TOKEN',
    envOnly: true,
    startupOnly: true,
    secret: true,
    description: 'Bearer token of the admin API. Unset: every `/admin/*` call is refused.',
  }),
  maxBodyBytes: int(1, 2 ** 31 - 1, 32 * 1024 * 1024, { description: 'A larger request body gets 413 and nothing is forwarded.' }),
  bodyBudgetBytes: int(1, 2 ** 40, 64 * 1024 * 1024, {
    description:
      'Bytes all request bodies in flight may hold together, raw and decoded; past it 503. One client address holds at most half of it (at least `maxBodyBytes`). At least `maxBodyBytes` and `maxDecodedBodyBytes`.',
  }),
  maxDecodedBodyBytes: int(1, 2 ** 31 - 1, 8 * 1024 * 1024, { description: 'A compressed body may decode to this many bytes at most; past it 413.' }),
  server: Type.Object(
    {
      maxConnections: intOrNull(1, 1_000_000, {
        env: 'SLUICE_MAX_CONNECTIONS',
        description: `Open client connections at most; more are closed as they arrive. Unset: ${MAX_CONNECTIONS_CAP}, or fewer if \`ulimit -n\` leaves room for fewer (the start-up log says which).`,
      }),
      headersTimeoutSeconds: int(1, 3600, 15, {
        description: "A request's headers must be complete this long after its connection opened or went busy, else 408. At most `server.requestTimeoutSeconds`.",
      }),
      // Node's own default: a 32 MiB body at about 1 Mbit/s still arrives.
      requestTimeoutSeconds: int(1, DAY, 300, { description: 'A whole request (headers and body) must have arrived this long after it began, else 408.' }),
      keepAliveTimeoutSeconds: int(1, 3600, 65, { description: 'An idle keep-alive connection is closed after this long.' }),
    },
    { description: "The public listener's bounds on connections and on how long a client may take to send." },
  ),
  trustedProxies: Type.Array(Type.String({ pattern: NON_EMPTY, format: 'cidr' }), {
    default: [],
    description: 'Addresses or CIDRs whose X-Forwarded-For is believed (e.g. your ingress).',
  }),
  ipv6Prefix: int(32, 128, 64, {
    description:
      'Per-address budgets count an IPv6 client per network of this many bits (one customer holds a whole /64, or more); an IPv4 address, IPv4-mapped ones included, is its own budget. A change starts the IPv6 budgets afresh.',
  }),
  freeTier: Type.Object(
    {
      perMinute: int(1, 1_000_000, 20, { description: 'Admitted calls of a user to free models in any rolling window...' }),
      windowSeconds: int(1, MAX_WINDOW_SECONDS, 60, { description: '...of this many seconds (a true sliding window).' }),
      perDay: int(1, 100_000_000, 100, { description: 'Admitted calls per calendar day...' }),
      timeZone: text('Asia/Shanghai', { format: 'time-zone', description: '...in this time zone (reset at its 00:00).' }),
      modelSuffix: text('-free', {
        description:
          "A model is free when its id ends with this suffix (exclusive with `freeTier.models`), compared as the relay's database may compare ids: case, trailing spaces, accents and width aside (docs/limits.md).",
      }),
      models: Type.Union([Type.Array(Type.String({ pattern: NON_EMPTY })), Type.Null()], {
        default: null,
        description: 'Explicit list of free model ids, compared the same way; replaces the suffix rule when set (exclusive with `freeTier.modelSuffix`).',
      }),
      pinnedChannels: Type.Union([Type.Literal('all'), Type.Array(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), { listOf: 'channel ids' })], {
        default: 'all',
        description:
          "Calls whose key asks the relay for a channel (`sk-<key>-<n>`, an administrator's: the relay then serves any model name from channel n) that count as free, whatever model they name: `all`, or the ids of the channels serving free models (`[]`: none) (docs/limits.md).",
      }),
      shadow: flag(false, { description: 'Evaluate, count and report, but admit: try a new limit safely.' }),
    },
    { description: 'The free tier: how often a user may call the free models.' },
  ),
  ipLimits: Type.Array(ipLimitRule, {
    default: DEFAULT_IP_LIMITS,
    listOf: 'rules',
    description: 'Per-address limits; the first rule whose path matches wins. A list in the file replaces the default rules entirely; `[]` turns them off.',
  }),
  logLevel: Type.Union(
    [Type.Literal('fatal'), Type.Literal('error'), Type.Literal('warn'), Type.Literal('info'), Type.Literal('debug'), Type.Literal('trace'), Type.Literal('silent')],
    { default: 'info', env: 'SLUICE_LOG_LEVEL', description: 'Lines below this level are not written.' },
  ),
  accessLog: Type.Union([Type.Literal('all'), Type.Literal('errors'), Type.Literal('off')], {
    default: 'all',
    env: 'SLUICE_ACCESS_LOG',
    description:
      'Which requests get an access line (at info): every one; only those not admitted in the end (refused, failed, cut by either side) or answered 400 or more; or none.',
  }),
  drainSeconds: int(0, 3600, 30, {
    env: 'SLUICE_DRAIN_SECONDS',
    description:
      'Once a drain starts (SIGTERM, or the drain hook in `drainDir`): how long in-flight requests and open streams may take; what is still open then is cut (outcome `drain_deadline`).',
  }),
  drainDir: textOrNull({
    env: 'SLUICE_DRAIN_DIR',
    startupOnly: true,
    description:
      "A directory shared with the relay's container only (docs/kubernetes.md, Shutdown): a file `drain` appearing there starts the drain, and sluice writes `drained` there once nothing is in flight. Unset: only SIGTERM starts a drain.",
  }),
  limits: Type.Object(
    {
      onStoreError: Type.Union([Type.Literal('open'), Type.Literal('closed')], {
        default: 'open',
        description: 'When the store fails: `open` admits and counts per replica in memory; `closed` answers 503.',
      }),
      rememberRefusalsSeconds: int(0, 3600, 10, {
        description:
          "How long a replica answers a refused client's further calls from memory, at most, before it asks the store again (0: always ask). Bounds how stale such an answer can be when the store changes behind its back.",
      }),
    },
    { description: 'How limits behave around the store.' },
  ),
});

/** The settings as the file and environment give them, validated and with defaults filled in. */
export type Settings = Static<typeof SETTINGS>;

/** The settings' node kinds the loader and the docs generator know. */
export type Node = TSchema & Partial<Meta>;

export function kindOf(s: TSchema): string {
  return s[Kind];
}

/** A union with null: the setting may be unset. Returns the schema of its value, else null. */
export function nullableOf(s: TSchema): TSchema | null {
  if (kindOf(s) !== 'Union') return null;
  const members = (s.anyOf as TSchema[]).filter((m) => kindOf(m) !== 'Null');
  return members.length === 1 && members.length < (s.anyOf as TSchema[]).length ? members[0]! : null;
}

/** A union of string literals: one of the listed words. Returns them, else null. */
export function choicesOf(s: TSchema): string[] | null {
  if (kindOf(s) !== 'Union') return null;
  const members = s.anyOf as TSchema[];
  return members.every((m) => kindOf(m) === 'Literal') ? members.map((m) => String(m.const)) : null;
}

export function propertiesOf(s: TSchema): Array<[string, Node]> {
  return Object.entries(s.properties as Record<string, Node>);
}

/** One setting (a leaf), or one start-up-only group, with where it sits. */
export interface SettingEntry {
  /** The file key path, dotted (`server.maxConnections`). */
  path: string;
  /** The path in the effective config (differs where a value is held parsed: `relayDb.dsn`). */
  configPath: string;
  schema: Node;
  /** The string format of its value, if any (of the value inside a union with null too). */
  format: string | undefined;
  startupOnly: boolean;
  secret: boolean;
}

/**
 * Walks the schema: `take` says whether a node is an entry; the walk does not go below an entry,
 * nor below a node that is not a group.
 */
function walk(take: (s: Node) => boolean): SettingEntry[] {
  const out: SettingEntry[] = [];
  const visit = (s: Node, path: string[], configPath: string[], startupOnly: boolean, secret: boolean): void => {
    if (take(s)) {
      out.push({ path: path.join('.'), configPath: configPath.join('.'), schema: s, format: (nullableOf(s) ?? s).format as string | undefined, startupOnly, secret });
      return;
    }
    if (kindOf(s) !== 'Object') return;
    for (const [k, c] of propertiesOf(s)) visit(c, [...path, k], [...configPath, c.configKey ?? k], startupOnly || c.startupOnly === true, secret || c.secret === true);
  };
  visit(SETTINGS, [], [], false, false);
  return out;
}

/** Every setting, in the schema's order. */
export const SETTING_LIST: readonly SettingEntry[] = Object.freeze(walk((s) => kindOf(s) !== 'Object'));

/**
 * What a reload cannot change, each named once: a whole group (`redis`) or one setting (`port`),
 * in the schema's order.
 */
export const STARTUP_ONLY: readonly SettingEntry[] = Object.freeze(walk((s) => s.startupOnly === true));

/** The secret settings. */
export const SECRETS: readonly SettingEntry[] = Object.freeze(SETTING_LIST.filter((e) => e.secret));

/** What a set secret shows as, in the effective config and in logs; a config file holding it is refused (it is no value). */
export const REDACTED = '[redacted]';

/**
 * What pino redacts in a logged config (`{ config }`): the secrets of the effective config as
 * publicConfig prints it (file keys: `relayDb.url`), and as held parsed (`relayDb.dsn`), in case a
 * config is ever logged whole. Named exactly: a wildcard path makes pino walk every field of every line.
 */
export const CONFIG_REDACT_PATHS: readonly string[] = Object.freeze([...new Set(SECRETS.flatMap((e) => [`config.${e.path}`, `config.${e.configPath}`]))]);

/** Every environment variable sluice reads, with the setting it sets. */
export const ENV_VARS: Readonly<Record<string, string>> = Object.freeze({
  SLUICE_CONFIG: 'path of the YAML/JSON config file (hot-reloaded)',
  ...Object.fromEntries(SETTING_LIST.filter((e) => e.schema.env).map((e) => [e.schema.env!, e.path])),
});

function defaultsOf(s: Node): unknown {
  if (kindOf(s) === 'Object') return Object.fromEntries(propertiesOf(s).map(([k, c]) => [k, defaultsOf(c)]));
  return s.default;
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * Every setting's default (upstream.url has none: it is required). Frozen; spread it to vary one.
 */
export const DEFAULTS: Readonly<Omit<Settings, 'upstream'> & { upstream: Omit<Settings['upstream'], 'url'> }> = deepFreeze(defaultsOf(SETTINGS) as Settings);

/** A rule between settings: the sentence the documentation shows, and its check. */
export interface Rule {
  doc: string;
  /** What is wrong, naming the keys; null when the rule holds. `file` is the file as given. */
  problem: (s: Settings, file: Readonly<Record<string, unknown>>) => string | null;
}

export const RULES: readonly Rule[] = Object.freeze([
  {
    doc: '`freeTier.modelSuffix` and `freeTier.models` are exclusive: set one.',
    problem: (_s, file) => {
      // Asked of the file: the suffix has a default, so the settings cannot tell whether it was set.
      const ft = file.freeTier as Record<string, unknown> | null | undefined;
      return typeof ft === 'object' && ft !== null && ft.modelSuffix != null && ft.models != null
        ? 'config keys "freeTier.modelSuffix" and "freeTier.models" are exclusive: set one'
        : null;
    },
  },
  {
    doc: 'The names of `ipLimits` rules are unique.',
    problem: (s) => {
      const i = s.ipLimits.findIndex((r, j) => s.ipLimits.findIndex((o) => o.name === r.name) !== j);
      return i === -1 ? null : `config key "ipLimits[${i}].name" repeats the rule name "${s.ipLimits[i]!.name}"`;
    },
  },
  {
    doc: '`redis.sentinels` needs `redis.sentinelName`.',
    problem: (s) => (s.redis.sentinels && !s.redis.sentinelName ? 'config key "redis.sentinelName" is required with "redis.sentinels"' : null),
  },
  {
    doc: '`redis.sentinels` and `redis.clusterNodes` are exclusive.',
    problem: (s) => (s.redis.sentinels && s.redis.clusterNodes ? 'config keys "redis.sentinels" and "redis.clusterNodes" are exclusive' : null),
  },
  {
    doc: 'Sentinel or Cluster needs `redis.url`: it supplies the password, TLS (`rediss://`) and database.',
    problem: (s) =>
      (s.redis.sentinels || s.redis.clusterNodes) && s.redis.url === null
        ? 'SLUICE_REDIS_URL (or redis.url) is required with Sentinel or Cluster: it supplies the password, TLS (rediss://) and database'
        : null,
  },
  {
    doc: '`server.headersTimeoutSeconds` is at most `server.requestTimeoutSeconds`: Node refuses a headers timeout longer than the request timeout it is part of.',
    problem: ({ server: { headersTimeoutSeconds: h, requestTimeoutSeconds: r } }) =>
      h > r ? `config key "server.headersTimeoutSeconds" (${h}) must not exceed "server.requestTimeoutSeconds" (${r})` : null,
  },
  {
    doc: '`bodyBudgetBytes` is at least `maxBodyBytes`, or a body of the allowed size could never be read.',
    problem: (s) =>
      s.bodyBudgetBytes < s.maxBodyBytes
        ? `config key "bodyBudgetBytes" (${s.bodyBudgetBytes}) must be at least "maxBodyBytes" (${s.maxBodyBytes}), or a body of the allowed size could never be read`
        : null,
  },
  {
    doc: '`bodyBudgetBytes` is at least `maxDecodedBodyBytes`.',
    problem: (s) =>
      s.bodyBudgetBytes < s.maxDecodedBodyBytes ? `config key "bodyBudgetBytes" (${s.bodyBudgetBytes}) must be at least "maxDecodedBodyBytes" (${s.maxDecodedBodyBytes})` : null,
  },
]);
