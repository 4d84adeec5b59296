/**
 * "Unblock this user": an operator resets a user's free-tier counts, or an address's per-IP
 * counts, through one replica's admin API, and every replica admits the next call at once, the
 * refusals each remembered (limits.rememberRefusalsSeconds) forgotten. Two sluice replicas on one
 * real Redis (and one on the embedded store), real sockets, the relay stand-in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { tokenFingerprint } from '../../src/admin/server.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { freshUser, metricReader } from '../support/helpers.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { uniquePrefix } from '../support/redis.js';
import { eventually } from '../support/time.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const FILE = {
  freeTier: { perMinute: 2, perDay: 100 },
  // 127.0.0.1 (the test) may say who the client is: IPv6 clients without IPv6 sockets.
  trustedProxies: ['127.0.0.1'],
  ipLimits: [{ name: 'query', paths: ['/api/*'], limit: 2, windowSeconds: 600 }],
};

const free = (h: Harness, key: string) =>
  request(h.url, 'POST', '/v1/chat/completions', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'vend-flash-free', messages: [] }) });
/** A query call from `ip`, without a key: the per-IP limit counts it before authentication (so 401 when it lets it through, bare 429 when not). */
const query = async (h: Harness, ip: string) => {
  const r = await request(h.url, 'GET', '/api/status', { headers: { 'x-forwarded-for': ip } });
  return { status: r.status === 429 ? 429 : r.status === 401 ? 'passed' : r.status };
};

describe('unblocking on every replica of one Redis', () => {
  let relay: RelayStandin;
  let a: Harness;
  let b: Harness;
  const logs = capturedLog();
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    const prefix = uniquePrefix('unblock');
    a = await startHarness({ store: 'redis', relay, prefix, file: FILE, log: logs.log });
    b = await startHarness({ store: 'redis', relay, prefix, file: FILE });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await relay?.close();
  });

  it('resets a user refused on both replicas (each remembering it) through one, and the next call is admitted on both', async () => {
    const { user, key } = await freshUser(a, 'blocked');
    const rememberedA = metricReader(a, 'sluice_remembered_refusals_total', { limit: 'free_tier' });
    const rememberedB = metricReader(b, 'sluice_remembered_refusals_total', { limit: 'free_tier' });
    expect((await free(a, key)).status).toBe(200);
    expect((await free(a, key)).status).toBe(200);
    for (const h of [a, b]) expect((await free(h, key)).status).toBe(429);
    // Asked again, each replica answers from memory: the refusal is remembered on both.
    const [ra, rb] = [await rememberedA(), await rememberedB()];
    for (const h of [a, b]) expect((await free(h, key)).status).toBe(429);
    expect([(await rememberedA()) - ra, (await rememberedB()) - rb]).toEqual([1, 1]);

    const r = await fetch(`${a.adminUrl}/admin/users/${encodeURIComponent(user)}/limits`, { method: 'DELETE', headers: admin });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { freeTier: { window: { used: number }; day: { used: number } } }).freeTier).toMatchObject({ window: { used: 0 }, day: { used: 0 } });

    // The replica that reset it admits at once; the other within the moment pub/sub takes.
    expect((await free(a, key)).status).toBe(200);
    await eventually(async () => expect((await free(b, key)).status).toBe(200), { timeoutMs: 1000, intervalMs: 20, what: 'the free call let through on the other replica' });
    // Counting starts afresh: the two admitted calls fill the window again.
    for (const h of [a, b]) expect((await free(h, key)).status).toBe(429);

    const line = logs.lines.find((l) => l.msg === 'admin action' && l.action === 'limits.reset');
    expect(line).toMatchObject({ level: 30, action: 'limits.reset', user, status: 200, admin: tokenFingerprint(ADMIN_TOKEN) });
    expect(JSON.stringify(logs.lines)).not.toContain(ADMIN_TOKEN);
  });

  it("shows and resets an address's per-IP counts by the bucket it counts in (IPv6: its /64), on every replica", async () => {
    expect((await query(a, '2001:db8:0:7::5')).status).toBe('passed');
    expect((await query(b, '2001:db8:0:7::6')).status).toBe('passed');
    for (const h of [a, b]) expect((await query(h, '2001:db8:0:7:ffff::1')).status).toBe(429);

    // Any address of the /64, in any spelling the path can carry, names the bucket.
    for (const spelled of ['2001:db8:0:7::99', '2001%3Adb8%3A0%3A7%3A%3A99', '[2001:db8:0:7::99]', '2001:DB8:0:7:0:0:0:99']) {
      const r = await fetch(`${b.adminUrl}/admin/ips/${spelled}/limits`, { headers: admin });
      expect(r.status, spelled).toBe(200);
      expect(await r.json(), spelled).toMatchObject({
        ipLimits: { address: '2001:db8:0:7::99', bucket: '2001:db8:0:7::/64', rules: [{ name: 'query', limit: 2, windowSeconds: 600, used: 2, remaining: 0 }] },
      });
    }
    const shown = (await (await fetch(`${b.adminUrl}/admin/ips/2001:db8:0:7::99/limits`, { headers: admin })).json()) as {
      ipLimits: { rules: Array<{ retryAfterSeconds: number }> };
    };
    expect(shown.ipLimits.rules[0]!.retryAfterSeconds).toBeGreaterThan(590);

    const reset = await fetch(`${b.adminUrl}/admin/ips/2001:db8:0:7::1234/limits`, { method: 'DELETE', headers: admin });
    expect(reset.status).toBe(200);
    expect(await reset.json()).toMatchObject({ ipLimits: { bucket: '2001:db8:0:7::/64', rules: [{ used: 0, remaining: 2 }] } });
    expect((await query(b, '2001:db8:0:7::5')).status).toBe('passed');
    await eventually(async () => expect((await query(a, '2001:db8:0:7::5')).status).toBe('passed'), { timeoutMs: 1000, intervalMs: 20, what: 'the query let through' });
    // Another /64 was never touched.
    const other = await (await fetch(`${a.adminUrl}/admin/ips/2001:db8:0:8::1/limits`, { headers: admin })).json();
    expect(other).toMatchObject({ ipLimits: { bucket: '2001:db8:0:8::/64', rules: [{ used: 0 }] } });
  });

  it('names an IPv4 address, mapped spellings included, as itself', async () => {
    const r = await fetch(`${a.adminUrl}/admin/ips/::ffff:192.0.2.7/limits`, { headers: admin });
    expect(await r.json()).toMatchObject({ ipLimits: { address: '192.0.2.7', bucket: '192.0.2.7' } });
  });

  it('answers an address that is none with 400 invalid_address, not echoing it', async () => {
    for (const bad of ['not-an-ip', '999.1.1.1', '1.2.3', '2001:db8::5::1', '%3Cscript%3E', '1.2.3.4%2F32']) {
      const r = await fetch(`${a.adminUrl}/admin/ips/${bad}/limits`, { method: 'DELETE', headers: admin });
      expect(r.status, bad).toBe(400);
      const text = await r.text();
      expect(JSON.parse(text).error.code, bad).toBe('invalid_address');
      expect(text).not.toContain('script');
    }
    expect((await fetch(`${a.adminUrl}/admin/ips/%zz/limits`, { headers: admin })).status).toBe(400);
    expect((await fetch(`${a.adminUrl}/admin/users/a%7Bb/limits`, { method: 'DELETE', headers: admin })).status).toBe(400);
  });

  it('logs a refused admin call as a warning naming the action, with no fingerprint', async () => {
    const r = await fetch(`${a.adminUrl}/admin/users/x/limits`, { method: 'DELETE', headers: { authorization: 'Bearer wrong-token-wrong-token' } });
    expect(r.status).toBe(401);
    const line = logs.lines.filter((l) => l.msg === 'admin call refused: missing or wrong admin token').at(-1);
    expect(line).toMatchObject({ level: 40, action: 'limits.reset', status: 401 });
    expect(line).not.toHaveProperty('admin');
  });
});

describe('unblocking on the embedded store', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', file: FILE });
  });
  afterAll(() => h?.close());

  it('resets a remembered refusal in the process, and the next call is admitted', async () => {
    const { user, key } = await freshUser(h, 'embedded');
    for (let i = 0; i < 2; i++) expect((await free(h, key)).status).toBe(200);
    expect((await free(h, key)).status).toBe(429);
    expect((await free(h, key)).status).toBe(429);
    expect((await fetch(`${h.adminUrl}/admin/users/${user}/limits`, { method: 'DELETE', headers: admin })).status).toBe(200);
    expect((await free(h, key)).status).toBe(200);
  });
});
