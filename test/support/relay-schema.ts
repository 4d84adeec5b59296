/**
 * The relay's `tokens` and `users` tables, created as the relay's ORM (gorm) creates them on each
 * database: new-api (model/token.go, model/user.go) and one-api (no soft delete, `char(48)` key).
 * Types follow gorm's mapping per dialect: Go `int` is `bigint` on PostgreSQL and MySQL and
 * `integer` on SQLite, `bool` is `boolean` / `tinyint(1)` / `numeric`, an indexed `string` is
 * `varchar(191)` on MySQL, `gorm.DeletedAt` is `timestamptz` / `datetime(3)` / `datetime`.
 */
export type Dialect = 'postgres' | 'mysql' | 'sqlite';
export type RelayFlavour = 'new-api' | 'one-api' | 'new-api-char48';

export function relayDdl(d: Dialect, flavour: RelayFlavour): string[] {
  const q = (n: string): string => (d === 'mysql' ? `\`${n}\`` : `"${n}"`);
  const T = {
    postgres: { id: 'bigserial', int: 'bigint', int32: 'integer', bool: 'boolean', str: 'text', idxStr: 'text', time: 'timestamptz' },
    mysql: { id: 'bigint AUTO_INCREMENT', int: 'bigint', int32: 'int', bool: 'boolean', str: 'longtext', idxStr: 'varchar(191)', time: 'datetime(3) NULL' },
    sqlite: { id: 'integer PRIMARY KEY AUTOINCREMENT', int: 'integer', int32: 'int', bool: 'numeric', str: 'text', idxStr: 'text', time: 'datetime' },
  }[d];
  const pk = d === 'sqlite' ? '' : `, PRIMARY KEY (${q('id')})`;
  const oneApi = flavour === 'one-api';
  const keyType = flavour === 'new-api' ? 'varchar(128)' : 'char(48)';
  const tokenCols = [
    `${q('id')} ${T.id}`,
    `${q('user_id')} ${T.int}`,
    `${q('key')} ${keyType}`,
    `${q('status')} ${T.int} DEFAULT 1`,
    `${q('name')} ${T.idxStr}`,
    `${q('created_time')} bigint`,
    `${q('accessed_time')} bigint`,
    `${q('expired_time')} bigint DEFAULT -1`,
    `${q('remain_quota')} ${T.int} DEFAULT 0`,
    `${q('unlimited_quota')} ${T.bool}${oneApi ? ' DEFAULT false' : ''}`,
    ...(oneApi
      ? [`${q('used_quota')} ${T.int} DEFAULT 0`, `${q('models')} text`, `${q('subnet')} ${d === 'mysql' ? 'varchar(191)' : 'text'} DEFAULT ''`]
      : [
          `${q('model_limits_enabled')} ${T.bool}`,
          `${q('model_limits')} text`,
          `${q('allow_ips')} ${d === 'mysql' ? 'varchar(191)' : 'text'} DEFAULT ''`,
          `${q('used_quota')} ${T.int} DEFAULT 0`,
          `${q('group')} ${d === 'mysql' ? 'varchar(191)' : 'text'} DEFAULT ''`,
          `${q('cross_group_retry')} ${T.bool}`,
          `${q('auto_groups')} text`,
          `${q('deleted_at')} ${T.time}`,
        ]),
  ];
  const userCols = [
    `${q('id')} ${T.id}`,
    `${q('username')} ${T.idxStr}`,
    `${q('password')} ${T.str} NOT NULL`,
    `${q('display_name')} ${T.idxStr}`,
    `${q('role')} ${T.int32} DEFAULT 1`,
    `${q('status')} ${T.int32} DEFAULT 1`,
    `${q('email')} ${T.idxStr}`,
    `${q('quota')} ${T.int32} DEFAULT 0`,
    `${q('group')} varchar(${oneApi ? 32 : 64}) DEFAULT 'default'`,
    ...(oneApi ? [] : [`${q('deleted_at')} ${T.time}`]),
  ];
  const suffix = d === 'mysql' ? ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci' : '';
  return [
    `CREATE TABLE ${q('users')} (${userCols.join(', ')}${pk})${suffix}`,
    `CREATE UNIQUE INDEX ${q('idx_users_username')} ON ${q('users')} (${q('username')})`,
    `CREATE TABLE ${q('tokens')} (${tokenCols.join(', ')}${pk})${suffix}`,
    `CREATE UNIQUE INDEX ${q('idx_tokens_key')} ON ${q('tokens')} (${q('key')})`,
    `CREATE INDEX ${q('idx_tokens_user_id')} ON ${q('tokens')} (${q('user_id')})`,
    `CREATE INDEX ${q('idx_tokens_name')} ON ${q('tokens')} (${q('name')})`,
    ...(oneApi
      ? []
      : [`CREATE INDEX ${q('idx_tokens_deleted_at')} ON ${q('tokens')} (${q('deleted_at')})`, `CREATE INDEX ${q('idx_users_deleted_at')} ON ${q('users')} (${q('deleted_at')})`]),
  ];
}
