import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../config/error.js';
import { describeRelayDsn, parseRelayDsn } from './dsn.js';

const parse = (v: string) => parseRelayDsn(v, 'SLUICE_RELAY_DB');

describe('parseRelayDsn: the forms the relay takes in SQL_DSN', () => {
  it('takes postgres:// and postgresql:// URLs as they are', () => {
    for (const v of ['postgres://root:s3cret@db:5432/new-api', 'postgresql://root:s3cret@db/new-api?sslmode=require']) {
      expect(parse(v)).toMatchObject({ dialect: 'postgres', connectionString: v, host: 'db', database: 'new-api' });
    }
  });

  it("reads the Go MySQL driver's form, with a password holding @, / and :", () => {
    expect(parse('root:p@ss/w:rd@tcp(mysql.svc:3307)/oneapi?charset=utf8mb4&parseTime=True&loc=Local')).toEqual({
      dialect: 'mysql',
      host: 'mysql.svc',
      port: 3307,
      socketPath: null,
      user: 'root',
      password: 'p@ss/w:rd',
      database: 'oneapi',
      tls: 'off',
      connectTimeoutMs: null,
    });
  });

  it('fills the Go driver defaults: tcp(127.0.0.1:3306) when no address, port 3306 when none, no password', () => {
    expect(parse('root@/oneapi')).toMatchObject({ host: '127.0.0.1', port: 3306, user: 'root', password: '' });
    expect(parse('u:p@tcp(db)/x')).toMatchObject({ host: 'db', port: 3306 });
    expect(parse('u:p@tcp([::1]:3306)/x')).toMatchObject({ host: '::1', port: 3306 });
    expect(parse('u:p@unix(/run/mysqld/mysqld.sock)/x')).toMatchObject({ socketPath: '/run/mysqld/mysqld.sock' });
  });

  it('reads tls= and timeout= from the Go form and mysql:// URLs', () => {
    expect(parse('u:p@tcp(db:3306)/x?tls=true&timeout=5s')).toMatchObject({ tls: 'verify', connectTimeoutMs: 5000 });
    expect(parse('u:p@tcp(db:3306)/x?tls=skip-verify&timeout=1m30s')).toMatchObject({ tls: 'skip-verify', connectTimeoutMs: 90_000 });
    // The Go driver's `preferred` encrypts without checking the certificate.
    expect(parse('u:p@tcp(db:3306)/x?tls=preferred')).toMatchObject({ tls: 'skip-verify' });
    expect(parse('mysql://u:p%40x@db:3310/oneapi?ssl=true')).toMatchObject({ dialect: 'mysql', host: 'db', port: 3310, password: 'p@x', database: 'oneapi', tls: 'verify' });
  });

  it('takes sqlite:<path>, dropping driver options the relay accepts in SQLITE_PATH', () => {
    expect(parse('sqlite:/data/one-api.db')).toEqual({ dialect: 'sqlite', path: '/data/one-api.db' });
    expect(parse('sqlite:one-api.db?_busy_timeout=30000')).toEqual({ dialect: 'sqlite', path: 'one-api.db' });
    expect(parse('sqlite:file:/data/one-api.db?mode=ro')).toEqual({ dialect: 'sqlite', path: '/data/one-api.db' });
  });

  it('refuses malformed values naming the setting and never echoing the password', () => {
    const cases = [
      '',
      '   ',
      'sqlite:',
      'redis://u:hunter2secret@db/0',
      'u:hunter2secret@tcp(db:3306)/',
      'u:hunter2secret@tcp(db:99999)/x',
      'u:hunter2secret@tcp(db:3306/x',
      'u:hunter2secret@udp(db:3306)/x',
      'u:hunter2secret@tcp(db:3306)/x?tls=maybe',
      'u:hunter2secret@tcp(db:3306)/x?timeout=soon',
      'u:hunter2secret@tcp(db:3306)/x?charset',
      'postgres://u:hunter2secret@db:5432/',
      'postgres://u:hunter2secret@:5432/x',
      'mysql://u:hunter2secret@db:3306',
      'no-database-here',
      'local',
      // A password holding / with no /<database> after the address: the address is read as ending at it.
      'u:hunter2se/cretpart@tcp(db:3306)',
      'u:hunter2se/cretpart@tcp(db:3306)?tls=true',
      // Parameters that are the password, or hold it.
      'u:p@tcp(db:3306)/x?hunter2secret',
      'u:p@tcp(db:3306)/x?a=%zzhunter2secret',
      'u:p@tcp(db:3306)/x?tls=hunter2secret',
      'u:p@tcp(db:3306)/x?timeout=hunter2secret',
    ];
    for (const v of cases) {
      let err: unknown;
      try {
        parseRelayDsn(v, 'relayDb.url');
      } catch (e) {
        err = e;
      }
      expect(err, v).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain('relayDb.url');
      expect((err as Error).message).not.toContain('hunter2secret');
      expect((err as Error).message).not.toContain('hunter2se');
      expect((err as Error).message).not.toContain('cretpart');
    }
  });

  it('describes an address for logs by dialect, host and database only', () => {
    expect(describeRelayDsn(parse('postgres://root:s3cret@db:5432/new-api'))).toBe('postgres db/new-api');
    expect(describeRelayDsn(parse('root:s3cret@tcp(db:3306)/oneapi'))).toBe('mysql db:3306/oneapi');
    expect(describeRelayDsn(parse('sqlite:/data/one-api.db'))).toBe('sqlite /data/one-api.db');
  });
});
