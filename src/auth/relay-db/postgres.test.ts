import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { libpqSemantics } from './postgres.js';

/** The TLS settings node-postgres derives from a connection string. */
const tlsOf = (url: string): unknown => (new pg.Client({ connectionString: url }) as unknown as { connectionParameters: { ssl: unknown } }).connectionParameters.ssl;

describe('libpqSemantics: sslmode as the relay (pgx, libpq) reads it', () => {
  it('encrypts without verifying the certificate for sslmode=require, as the relay does', () => {
    expect(tlsOf(libpqSemantics('postgres://u:p@db/newapi?sslmode=require'))).toEqual({ rejectUnauthorized: false });
  });

  it('keeps full verification for verify-full and no TLS for disable', () => {
    expect(tlsOf(libpqSemantics('postgres://u:p@db/newapi?sslmode=verify-full'))).toEqual({});
    expect(tlsOf(libpqSemantics('postgres://u:p@db/newapi?sslmode=disable'))).toBe(false);
  });

  it('leaves a URL without sslmode, or one that already chose, as it is', () => {
    expect(libpqSemantics('postgres://u:p@db/newapi')).toBe('postgres://u:p@db/newapi');
    expect(libpqSemantics('postgres://u:p@db/newapi?sslmode=require&uselibpqcompat=false')).toBe('postgres://u:p@db/newapi?sslmode=require&uselibpqcompat=false');
  });
});
