/**
 * The string formats settings use beyond "a non-empty string". Each is registered with TypeBox,
 * so the schema checks it, and says in words what is wrong: the loader puts that after the key
 * ("config key "trustedProxies[0]" has an invalid prefix length: ..."), and the generated
 * docs/configuration.md shows `doc`.
 */
import { isIP } from 'node:net';
import { FormatRegistry } from '@sinclair/typebox';

export interface Format {
  /** What a valid value is, for the documentation's range column. */
  doc: string;
  /** One item, for "must name at least one <noun>" when a list of them is empty. */
  noun: string;
  /** Null when the value is valid; else what is wrong with it, put after `config key "<key>"`. */
  problem: (value: string) => string | null;
}

export function parseCidr(entry: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | 'address' | 'prefix' {
  const [addr = '', bits] = entry.trim().split('/');
  const fam = isIP(addr);
  if (fam === 0) return 'address';
  const max = fam === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (bits !== undefined && !/^\d+$/.test(bits))) return 'prefix';
  return { address: addr, prefix, family: fam === 4 ? 'ipv4' : 'ipv6' };
}

/** A value as quoted in a message, unless it may hold a password (`user:pass@`, in a URL or put where a host:port goes) or a key (`?key=`). */
function quoted(s: string): string {
  return s.includes('@') || s.includes('?') ? '(not shown: it may hold a password or a key)' : JSON.stringify(s);
}

function urlProblem(s: string, protocols: readonly string[], expected: string, showValue: boolean): string | null {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    // A Redis URL may hold a password: it is not repeated.
    return showValue ? `is not a valid URL: ${quoted(s)}` : 'is not a valid URL';
  }
  if (!protocols.includes(u.protocol)) return `must be ${expected}, got ${u.protocol}`;
  return null;
}

export const FORMATS = {
  'http-url': {
    doc: 'http:// or https:// URL',
    noun: 'URL',
    problem: (s) => {
      const problem = urlProblem(s, ['http:', 'https:'], 'an http:// or https:// URL', true);
      if (problem !== null) return problem;
      // The relay is reached at its host, port and path; anything else in the URL would be dropped
      // in silence, and a user or password would be shown wherever the config is.
      const u = new URL(s);
      if (u.username !== '' || u.password !== '')
        return 'must not hold a user or password: sluice never sends them to the relay (a token for the relay goes in upstream.credential)';
      if (u.search !== '' || u.hash !== '') return "must not hold a query or a fragment: each request reaches the relay with its client's own";
      return null;
    },
  },
  'redis-url': {
    doc: 'redis:// or rediss:// URL',
    noun: 'URL',
    problem: (s) => {
      const problem = urlProblem(s, ['redis:', 'rediss:'], 'a redis:// or rediss:// URL', false);
      if (problem !== null) return problem;
      // ioredis selects the database the path names: a path that is no number would SELECT NaN, and its error end the process.
      const path = new URL(s).pathname;
      return path === '' || path === '/' || /^\/\d+$/.test(path) ? null : 'must name a database number after the host, if any (redis://host:6379/0)';
    },
  },
  cidr: {
    doc: 'IP address or CIDR (10.0.0.0/8, fd00::/8)',
    noun: 'address',
    problem: (s) => {
      const r = parseCidr(s);
      if (r === 'address') return `has an invalid address: ${JSON.stringify(s)}`;
      if (r === 'prefix') return `has an invalid prefix length: ${JSON.stringify(s)}`;
      return null;
    },
  },
  'time-zone': {
    doc: 'IANA time zone',
    noun: 'time zone',
    problem: (s) => {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: s });
        return null;
      } catch {
        return `is not a known IANA time zone: ${JSON.stringify(s)}`;
      }
    },
  },
  'host-port': {
    doc: 'host:port entries (a comma-separated string too)',
    noun: 'host:port',
    problem: (s) => (/^[^\s:@]+:\d{1,5}$/.test(s) || /^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(s) ? null : `must be host:port, got ${quoted(s)}`),
  },
  'key-prefix': {
    doc: 'no "{" or "}"',
    noun: 'prefix',
    problem: (s) => (s.includes('{') || s.includes('}') ? 'must not contain "{" or "}" (they would break Cluster hash tags)' : null),
  },
  'rule-name': {
    doc: 'letters, digits, "_", "-", "."; unique',
    noun: 'name',
    problem: (s) => (/^[A-Za-z0-9_.-]+$/.test(s) ? null : 'may hold only letters, digits, "_", "-" and "."'),
  },
  'limit-path': {
    doc: 'paths starting with "/", a prefix when ending in "*"',
    noun: 'path',
    problem: (s) => {
      if (!s.startsWith('/')) return 'must start with "/"';
      if (s.indexOf('*') !== -1 && s.indexOf('*') !== s.length - 1) return 'may hold "*" only at its end (a prefix)';
      return null;
    },
  },
} satisfies Record<string, Format>;

export type FormatName = keyof typeof FORMATS;

export function formatOf(name: string): Format | undefined {
  return (FORMATS as Record<string, Format>)[name];
}

for (const [name, f] of Object.entries(FORMATS)) FormatRegistry.Set(name, (v) => (f as Format).problem(v) === null);
