/**
 * A relay database user without SELECT on `tokens` or `users` sees neither in
 * information_schema (PostgreSQL and MySQL list only what a user may read), so the tables look
 * absent. Here such a refusal is told apart from a wrong database: the statements sluice needs are
 * tried (matching no row), and a privilege error (PostgreSQL 42501 insufficient_privilege,
 * MySQL/MariaDB 1142 ER_TABLEACCESS_DENIED_ERROR, 1143 ER_COLUMNACCESS_DENIED_ERROR) becomes a
 * message naming the privilege, the table (and column) and the grant that gives it.
 */
import type { RelayDsn } from './dsn.js';
import type { Dialect, Statement } from './sql.js';

/** The columns the lookups read, per table (sql.ts, tokensByKeyStatement). */
const NEEDED: Readonly<Record<'tokens' | 'users', readonly string[]>> = {
  tokens: ['id', 'user_id', 'key', 'status', 'expired_time', 'remain_quota', 'unlimited_quota'],
  users: ['id', 'status'],
};

/** Reads the needed columns of `table` and matches no row: refused exactly when a lookup would be. */
export function probeStatement(d: Dialect, table: 'tokens' | 'users'): Statement {
  const q = (name: string): string => (d === 'mysql' ? `\`${name}\`` : `"${name}"`);
  return { sql: `SELECT ${NEEDED[table].map(q).join(', ')} FROM ${table} WHERE 1 = 0`, params: [] };
}

/** The user sluice connects as, for the grant it needs (null for SQLite, which has none). */
function connectingUser(dsn: RelayDsn): string | null {
  if (dsn.dialect === 'mysql') return dsn.user || null;
  if (dsn.dialect === 'sqlite') return null;
  try {
    return decodeURIComponent(new URL(dsn.connectionString).username) || null;
  } catch {
    return null;
  }
}

/**
 * When `err` is a database's refusal for want of a privilege: a message naming what is missing
 * and how to grant it; else null. The driver's own text names the table (and column).
 */
export function privilegeProblem(err: unknown, dsn: RelayDsn): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  const text = err instanceof Error ? err.message : String(err);
  const mysqlTable = code === 'ER_TABLEACCESS_DENIED_ERROR';
  const mysqlColumn = code === 'ER_COLUMNACCESS_DENIED_ERROR';
  if (code !== '42501' && !mysqlTable && !mysqlColumn) return null;
  // PostgreSQL: `permission denied for table users`; MariaDB: "... for table `db`.`users`",
  // MySQL: "... for table 'users'"; a column: "... for column 'deleted_at' in table 'tokens'".
  const table = /table [`'"]?(?:[^`'".\s]+[`'"]?\.[`'"]?)?([A-Za-z_][\w]*)/.exec(text)?.[1] ?? 'tokens or users';
  const column = mysqlColumn ? /column [`'"]?([\w]+)/.exec(text)?.[1] : undefined;
  const user = connectingUser(dsn) ?? '<the user in the address>';
  const who = dsn.dialect === 'mysql' ? `'${user}'@'%'` : user;
  const on = dsn.dialect === 'mysql' ? `${dsn.database}.${table}` : table;
  const what = column === undefined ? `SELECT on table "${table}"` : `SELECT on column "${column}" of table "${table}"`;
  return `the relay database user "${user}" lacks ${what}, which sluice needs to read the relay's keys: GRANT SELECT ON ${on} TO ${who}; (docs/relay-keys.md, Grants)`;
}
