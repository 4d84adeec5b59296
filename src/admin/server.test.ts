/**
 * How the admin listener answers a failure: a refusal by its catalogue entry, a store that could
 * not answer as 503 store_unavailable (retrying may help), anything else as 500 internal_error
 * (sluice's own fault, logged).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../runtime/clock.js';
import type { Policy } from '../limits/policy.js';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import { eventually } from '../../test/support/time.js';
import { KeyService } from './keys.js';
import type { KeyLookup } from './key-lookup.js';
import { createAdminHandler } from './server.js';

const TOKEN = 'admin-token-for-this-test-0000000000';

/** A store whose key listing fails as a Redis outage does. */
class FailingStore extends MemoryStore {
  override listKeys(): Promise<never> {
    return Promise.reject(new Error('Connection is closed.'));
  }
}

describe('admin failures', () => {
  let server: Server;
  let base: string;
  const logged: string[] = [];

  /** What `lookupKey` does: each test that calls it sets it. */
  let lookupKey: (key: string) => Promise<KeyLookup> = () => Promise.reject(new Error('not used'));
  let closedSockets = 0;

  beforeAll(async () => {
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(line) });
    const handler = createAdminHandler({
      log,
      adminToken: TOKEN,
      keys: new KeyService(new FailingStore(), systemClock),
      lookupKey: (key) => lookupKey(key),
      limits: () => ({}) as Policy,
      metrics: new Metrics({ processMetrics: false }),
      ready: () => Promise.resolve({ ready: true, checks: {} }),
      effectiveConfig: () => {
        throw new Error('a bug in sluice');
      },
    });
    server = createServer(handler);
    server.on('connection', (socket) => socket.on('close', () => closedSockets++));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections()));

  const get = (path: string): Promise<Response> => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });

  it('answers a store that could not answer with 503 store_unavailable', async () => {
    const r = await get('/admin/keys?user=someone');
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ error: { code: 'store_unavailable', message: 'the store could not be reached' } });
  });

  it('answers any other failure with 500 internal_error, and logs its cause', async () => {
    logged.length = 0;
    const r = await get('/admin/config');
    expect(r.status).toBe(500);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('internal_error');
    expect(logged.join('')).toContain('a bug in sluice');
  });

  it('answers a state lookup the limiter cannot make as sluice’s own fault, not the store’s', async () => {
    const r = await get('/admin/users/someone/limits');
    expect(r.status).toBe(500);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('internal_error');
  });

  it('still logs a failure that comes after its client left, on the line of the abandoned call and as an error', async () => {
    logged.length = 0;
    let fail: (() => void) | undefined;
    lookupKey = () => new Promise((_, reject) => (fail = () => reject(new Error('a bug after the client left'))));
    const leaving = new AbortController();
    const sent = fetch(`${base}/admin/keys/lookup`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'sk-whose-is-this' }),
      signal: leaving.signal,
    }).catch(() => null);
    await eventually(() => fail !== undefined, { what: 'the lookup to start' });
    const closedBefore = closedSockets;
    leaving.abort();
    expect(await sent).toBeNull();
    await eventually(() => closedSockets > closedBefore, { what: 'the server to see the connection close' });
    fail?.();
    const lines = await eventually(() => {
      const parsed = logged.map((l) => JSON.parse(l) as Record<string, unknown>);
      return parsed.some((l) => l.msg === 'admin call abandoned: the connection closed before the answer') && parsed;
    });
    expect(lines.find((l) => l.msg === 'admin call abandoned: the connection closed before the answer')).toMatchObject({
      action: 'keys.lookup',
      status: null,
      err: 'a bug after the client left',
    });
    expect(lines.find((l) => l.msg === 'admin request failed')).toMatchObject({ level: 50, action: 'keys.lookup', err: expect.stringContaining('a bug after the client left') });
  });

  it('answers a malformed path segment with 400 bad_request', async () => {
    const r = await get('/admin/users/%E0%A4%A/limits');
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('bad_request');
  });
});
