/**
 * The relay's database address, in the forms the relay itself takes in `SQL_DSN` (so one Secret
 * value can feed both): `postgres://` / `postgresql://` URLs, MySQL in the Go driver's form
 * `user:pass@tcp(host:port)/db?param=value` (or a `mysql://` URL), and `sqlite:<path>`.
 *
 * Errors name the setting and never echo the value: a DSN usually holds a password.
 */
import { ConfigError } from '../../config/error.js';

export type RelayDsn =
  | { dialect: 'postgres'; connectionString: string; host: string; database: string }
  | {
      dialect: 'mysql';
      host: string;
      port: number;
      socketPath: string | null;
      user: string;
      password: string;
      database: string;
      /** `tls=` of the Go driver (or `ssl=` of a URL): off, on with verification, or on without. */
      tls: 'off' | 'verify' | 'skip-verify';
      connectTimeoutMs: number | null;
    }
  | { dialect: 'sqlite'; path: string };

const MYSQL_PORT = 3306;

/**
 * `setting` is how an operator finds the value: `SLUICE_RELAY_DB` or `relayDb.url`.
 * Throws ConfigError naming it; the message never contains the value.
 */
export function parseRelayDsn(raw: string, setting: string): RelayDsn {
  const value = raw.trim();
  const bad = (why: string): ConfigError => new ConfigError(`${setting} is not a usable relay database address: ${why} (the value is not shown: it may hold a password)`);
  if (value === '') throw bad('it is empty');
  const lower = value.toLowerCase();
  if (lower.startsWith('postgres://') || lower.startsWith('postgresql://')) return postgres(value, bad);
  if (lower.startsWith('mysql://')) return mysqlUrl(value, bad);
  if (lower.startsWith('sqlite:')) {
    // The relay's own SQLITE_PATH may carry driver options (`one-api.db?_busy_timeout=30000`).
    let path = value.slice('sqlite:'.length);
    if (path.startsWith('file:')) path = path.slice('file:'.length);
    const q = path.indexOf('?');
    if (q !== -1) path = path.slice(0, q);
    if (path === '') throw bad('"sqlite:" must be followed by the path of the relay\'s database file (one-api.db)');
    if (path.includes('\0')) throw bad('the SQLite path holds a NUL byte');
    return { dialect: 'sqlite', path };
  }
  if (lower.startsWith('local')) {
    throw bad('the relay reads "local..." as its own SQLite file; give sluice that file as sqlite:<path to one-api.db>');
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(lower))
    throw bad(`the scheme "${lower.slice(0, lower.indexOf(':'))}" is not one the relay takes (postgres, postgresql, mysql, or the Go MySQL form)`);
  return goMysql(value, bad);
}

type Bad = (why: string) => ConfigError;

/** A URL form: its parsed URL and database name, or the error naming what is missing. */
function urlForm(value: string, scheme: 'postgres' | 'mysql', bad: Bad): { u: URL; database: string } {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw bad(`it is not a valid ${scheme}:// URL`);
  }
  const database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  if (u.hostname === '' && !(scheme === 'postgres' && u.searchParams.has('host'))) throw bad(`the ${scheme} URL names no host`);
  if (database === '') throw bad(`the ${scheme} URL names no database (${scheme}://user:pass@host/<database>)`);
  return { u, database };
}

function postgres(value: string, bad: Bad): RelayDsn {
  const { u, database } = urlForm(value, 'postgres', bad);
  return { dialect: 'postgres', connectionString: value, host: u.hostname || (u.searchParams.get('host') ?? ''), database };
}

function mysqlUrl(value: string, bad: Bad): RelayDsn {
  const { u, database } = urlForm(value, 'mysql', bad);
  const params = new Map(u.searchParams);
  return {
    dialect: 'mysql',
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port === '' ? MYSQL_PORT : Number(u.port),
    socketPath: null,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database,
    tls: tlsMode(params.get('tls') ?? params.get('ssl') ?? params.get('ssl-mode'), bad),
    connectTimeoutMs: goDuration(params.get('timeout'), bad),
  };
}

/**
 * The Go driver's grammar, `[user[:password]@][net[(addr)]]/dbname[?param1=value1&...]`, read the
 * way it reads it: the last `/` ends the address (a password may hold `/`), the last `@` before it
 * ends the credentials (a password may hold `@`), the first `:` splits user from password.
 */
function goMysql(value: string, bad: Bad): RelayDsn {
  const slash = value.lastIndexOf('/');
  if (slash === -1) throw bad('it is neither a URL nor the Go MySQL form user:pass@tcp(host:port)/dbname');
  const head = value.slice(0, slash);
  const tail = value.slice(slash + 1);
  const q = tail.indexOf('?');
  const database = q === -1 ? tail : tail.slice(0, q);
  const params = new Map<string, string>();
  if (q !== -1) {
    for (const pair of tail.slice(q + 1).split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      if (eq === -1) throw bad('a parameter after ? has no value (name=value)');
      let v = pair.slice(eq + 1);
      try {
        v = decodeURIComponent(v);
      } catch {
        throw bad('a parameter after ? is not validly escaped');
      }
      params.set(pair.slice(0, eq), v);
    }
  }
  if (database === '') throw bad('it names no database (user:pass@tcp(host:3306)/<database>)');
  const at = head.lastIndexOf('@');
  const cred = at === -1 ? '' : head.slice(0, at);
  const addrPart = at === -1 ? head : head.slice(at + 1);
  const colon = cred.indexOf(':');
  const user = colon === -1 ? cred : cred.slice(0, colon);
  const password = colon === -1 ? '' : cred.slice(colon + 1);

  let net = 'tcp';
  let addr = '';
  if (addrPart !== '') {
    const open = addrPart.indexOf('(');
    if (open === -1) {
      net = addrPart;
    } else {
      if (!addrPart.endsWith(')')) throw bad('the address must be written net(addr), e.g. tcp(127.0.0.1:3306)');
      net = addrPart.slice(0, open);
      addr = addrPart.slice(open + 1, -1);
    }
  }
  let host = '127.0.0.1';
  let port = MYSQL_PORT;
  let socketPath: string | null = null;
  if (net === 'unix') {
    socketPath = addr || '/tmp/mysql.sock';
  } else if (net === 'tcp' || net === 'tcp6' || net === 'tcp4') {
    if (addr !== '') {
      const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(addr);
      if (!m) throw bad('the tcp address must be host:port');
      host = m[1] ?? (m[2] || '127.0.0.1');
      if (m[3] !== undefined) port = Number(m[3]);
    }
  } else {
    throw bad(
      'the address before /<database> is not tcp(host:port) or unix(path) (the form ends the address at the last /: a / in the password needs /<database> after the address)',
    );
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad('the port is out of range');
  return {
    dialect: 'mysql',
    host,
    port,
    socketPath,
    user,
    password,
    database,
    tls: tlsMode(params.get('tls'), bad),
    connectTimeoutMs: goDuration(params.get('timeout'), bad),
  };
}

function tlsMode(v: string | undefined, bad: Bad): 'off' | 'verify' | 'skip-verify' {
  if (v === undefined || v === '' || v === 'false' || v === 'disable' || v === 'DISABLED') return 'off';
  if (v === 'true' || v === 'required' || v === 'REQUIRED' || v === 'VERIFY_IDENTITY' || v === 'verify-full') return 'verify';
  // The Go driver's `preferred` encrypts without checking the certificate (and falls back to plain
  // text when the server offers no TLS, which mysql2 cannot: there sluice fails; use tls=false).
  if (v === 'skip-verify' || v === 'preferred' || v === 'VERIFY_CA') return 'skip-verify';
  throw bad('its tls= is not supported (use true, skip-verify or false)');
}

/** A Go duration as the driver's `timeout=` takes it (`5s`, `500ms`, `1m30s`), in milliseconds. */
function goDuration(v: string | undefined, bad: Bad): number | null {
  if (v === undefined || v === '') return null;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let at = 0;
  for (let m = re.exec(v); m !== null; m = re.exec(v)) {
    total += Number(m[1]) * units[m[2]!]!;
    at = re.lastIndex;
  }
  if (at !== v.length || at === 0) throw bad('its timeout= is not a Go duration such as 5s');
  return Math.round(total);
}

/** A DSN for logs and /admin/config: the dialect, host and database, never credentials. */
export function describeRelayDsn(d: RelayDsn): string {
  switch (d.dialect) {
    case 'postgres':
      return `postgres ${d.host}/${d.database}`;
    case 'mysql':
      return `mysql ${d.socketPath ?? `${d.host}:${d.port}`}/${d.database}`;
    case 'sqlite':
      return `sqlite ${d.path}`;
  }
}
