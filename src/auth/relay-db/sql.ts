/**
 * The read-only statements sluice runs against the relay's database, per dialect and schema.
 * `key` and `group` are reserved words (quoted), keys are always bound parameters, and the key
 * column is compared bare (no function around it) so the unique index serves the lookup.
 */
import { idText, integer, storedKey, truthy, type TokenRow } from './rules.js';

export type Dialect = 'postgres' | 'mysql' | 'sqlite';

/** new-api soft-deletes (`deleted_at`); one-api deletes rows and marks deleted users status 3. */
export type RelaySchema = 'new-api' | 'one-api';

export interface SchemaShape {
  schema: RelaySchema;
  /** Older new-api installs and one-api have no `users.deleted_at`. */
  usersDeletedAt: boolean;
}

export interface Statement {
  sql: string;
  params: unknown[];
}

function quote(d: Dialect, name: string): string {
  return d === 'mysql' ? `\`${name}\`` : `"${name}"`;
}

function placeholders(d: Dialect, n: number): string {
  const out: string[] = [];
  for (let i = 1; i <= n; i++) out.push(d === 'postgres' ? `$${i}` : '?');
  return out.join(', ');
}

/** The columns of `tokens` and `users` in the database sluice was given (the current schema/database). */
export function columnsStatement(d: Dialect): Statement {
  switch (d) {
    case 'postgres':
      return {
        sql: "SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND table_name IN ('tokens', 'users')",
        params: [],
      };
    case 'mysql':
      return {
        sql: "SELECT TABLE_NAME AS t, COLUMN_NAME AS c FROM information_schema.columns WHERE table_schema = DATABASE() AND TABLE_NAME IN ('tokens', 'users')",
        params: [],
      };
    case 'sqlite':
      return {
        sql: "SELECT 'tokens' AS t, name AS c FROM pragma_table_info('tokens') UNION ALL SELECT 'users' AS t, name AS c FROM pragma_table_info('users')",
        params: [],
      };
  }
}

const TOKEN_COLUMNS = ['id', 'user_id', 'key', 'status', 'expired_time', 'remain_quota', 'unlimited_quota'];

/**
 * Which relay wrote this database, from its columns; throws with a message for the operator when
 * the tables sluice needs are not there. `forced` (a setting) overrides the detection.
 */
export function detectSchema(rows: ReadonlyArray<Record<string, unknown>>, forced: RelaySchema | null): SchemaShape {
  const tokens = new Set<string>();
  const users = new Set<string>();
  for (const r of rows) {
    const table = String(r.t ?? r.T ?? '').toLowerCase();
    const column = String(r.c ?? r.C ?? '').toLowerCase();
    if (table === 'tokens') tokens.add(column);
    else if (table === 'users') users.add(column);
  }
  if (tokens.size === 0) throw new Error('the relay database has no "tokens" table: is this the relay\'s main database (its SQL_DSN)?');
  if (users.size === 0) throw new Error('the relay database has no "users" table: is this the relay\'s main database (its SQL_DSN)?');
  const missing = TOKEN_COLUMNS.filter((c) => !tokens.has(c));
  if (missing.length) throw new Error(`the relay's "tokens" table lacks the columns ${missing.join(', ')}: not a new-api or one-api schema`);
  if (!users.has('id') || !users.has('status')) throw new Error('the relay\'s "users" table lacks "id" or "status": not a new-api or one-api schema');
  const schema = forced ?? (tokens.has('deleted_at') ? 'new-api' : 'one-api');
  if (schema === 'new-api' && !tokens.has('deleted_at')) {
    throw new Error('relayDb.schema is new-api, but the "tokens" table has no deleted_at column (one-api?)');
  }
  return { schema, usersDeletedAt: users.has('deleted_at') };
}

/**
 * Tokens by key (the key as stored, without `sk-`), each joined with its user. A soft-deleted
 * token (new-api) is found too, marked `deleted`: the relay adds `deleted_at IS NULL` to every
 * query and so never finds it (rules.ts refuses it), but an operator asking why a key is refused,
 * or whose it was, is told (the unique index on `key` keeps one row per key either way).
 */
export function tokensByKeyStatement(d: Dialect, shape: SchemaShape, keys: readonly string[]): Statement {
  const k = quote(d, 'key');
  const userDeleted = shape.usersDeletedAt ? 'CASE WHEN u.deleted_at IS NULL THEN 0 ELSE 1 END' : '0';
  const deleted = shape.schema === 'new-api' ? 'CASE WHEN t.deleted_at IS NULL THEN 0 ELSE 1 END' : '0';
  // Ids as text: a 64-bit id past 2^53 would reach JavaScript rounded, and two users would be one.
  const text = d === 'mysql' ? 'CHAR' : 'TEXT';
  return {
    sql:
      `SELECT CAST(t.id AS ${text}) AS id, t.${k} AS token_key, t.status AS status, ${deleted} AS deleted, t.expired_time AS expired_time, ` +
      `t.remain_quota AS remain_quota, t.unlimited_quota AS unlimited_quota, CAST(t.user_id AS ${text}) AS user_id, ` +
      `u.status AS user_status, ${userDeleted} AS user_deleted ` +
      `FROM tokens t LEFT JOIN users u ON u.id = t.user_id ` +
      `WHERE t.${k} IN (${placeholders(d, keys.length)})`,
    params: [...keys],
  };
}

/** A row as any driver returns it, normalised. */
export function tokenRow(r: Record<string, unknown>): TokenRow {
  const userStatus = r.user_status === null || r.user_status === undefined ? null : integer(r.user_status);
  return {
    id: idText(r.id),
    key: storedKey(r.token_key),
    status: integer(r.status),
    deleted: truthy(r.deleted),
    expiredTime: integer(r.expired_time),
    remainQuota: integer(r.remain_quota),
    unlimitedQuota: truthy(r.unlimited_quota),
    userId: idText(r.user_id),
    userStatus,
    userDeleted: truthy(r.user_deleted),
  };
}
