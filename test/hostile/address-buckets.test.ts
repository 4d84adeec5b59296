/**
 * Per-IP limits keyed on the address, not on its text (issue 25, item 7). sluice trusts the
 * loopback proxy the test speaks through, and the test names its clients in X-Forwarded-For as a
 * proxy would pass them on: one IPv4 client in four spellings, six addresses of one IPv6 /64, a
 * zone id, a port, garbage. Each group must share one budget, as one client does.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { STORE_KINDS, useHarness, type Harness } from '../support/harness.js';
import { request, type RawResponse } from '../support/http.js';

/** Three calls per address bucket and ten minutes, on one path. */
const RULE = { name: 'probe', paths: ['/api/log/token'], limit: 3, windowSeconds: 600 };

const keys = new WeakMap<object, string>();

/** A harness with a key: per-IP limits count every call, but only a call with a key reaches the relay. */
function keyed(h: Harness): Harness {
  beforeAll(async () => {
    keys.set(h, (await h.createKey('bucket-user')).key);
  });
  return h;
}

function asClient(h: Harness, forwardedFor?: string): Promise<RawResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${keys.get(h)}` };
  if (forwardedFor !== undefined) headers['x-forwarded-for'] = forwardedFor;
  return request(h.url, 'GET', '/api/log/token', { headers });
}

/** The statuses of one call per entry, in order. */
async function statuses(h: Harness, clients: readonly string[]): Promise<number[]> {
  const out: number[] = [];
  for (const c of clients) out.push((await asClient(h, c)).status);
  return out;
}

describe.each(STORE_KINDS)('per-IP limits count an address once, however it is written (%s store)', (store) => {
  const h = keyed(useHarness({ store, file: { trustedProxies: ['127.0.0.1/32'], ipLimits: [RULE] } }));

  it('takes the IPv4-mapped spellings of 5.5.5.5 for 5.5.5.5: refused at the fourth call, as one address is', async () => {
    const spellings = ['5.5.5.5', '::ffff:505:505', '0:0:0:0:0:ffff:5.5.5.5', '::FFFF:5.5.5.5', '[::ffff:5.5.5.5]:443', '5.5.5.5:5678'];
    const got = await statuses(h, spellings);
    expect(got).toEqual([200, 200, 200, 429, 429, 429]);
    // The relay is told the address in one canonical spelling, whichever the client used.
    expect(h.relay.requests.map((r) => r.headers['x-forwarded-for'])).toEqual(['5.5.5.5', '5.5.5.5', '5.5.5.5']);
    // The refusal is the documented bare 429.
    const refused = await asClient(h, '::ffff:5.5.5.5');
    expect([refused.status, refused.body.length, Number(refused.headers['retry-after'])]).toEqual([429, 0, expect.any(Number)]);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(590);
  });

  it('takes six addresses of one IPv6 /64 for one client, and another /64 for another', async () => {
    const sameSlash64 = [
      '2001:db8:1:2::1',
      '2001:DB8:1:2::2',
      '2001:0db8:0001:0002:0000:0000:0000:0003',
      '2001:db8:1:2:ffff:ffff:ffff:ffff',
      '[2001:db8:1:2:abcd::9]:8443',
      '2001:db8:1:2:0:0:1.2.3.4',
    ];
    expect(await statuses(h, sameSlash64)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(await statuses(h, ['2001:db8:1:3::1', '2001:db8:2:2::1'])).toEqual([200, 200]);
  });

  it('drops a zone id: link-local addresses on any interface share their /64', async () => {
    expect(await statuses(h, ['fe80::1%eth0', 'fe80::2%eth1', 'fe80::3', 'FE80::4%25'])).toEqual([200, 200, 200, 429]);
  });

  it('counts an entry that names no address as the proxy that passed it, so garbage cannot make new budgets', async () => {
    // 127.0.0.1 itself (the trusted proxy, no X-Forwarded-For) shares the bucket with whatever it passed that is not an address.
    const garbage = ['unknown', '1.2.3', 'not-an-address', '0x7f.1'];
    expect(await statuses(h, garbage)).toEqual([200, 200, 200, 429]);
    expect((await asClient(h)).status).toBe(429);
  });
});

describe('ipv6Prefix', () => {
  const h = keyed(useHarness({ store: 'memory', file: { trustedProxies: ['127.0.0.1/32'], ipLimits: [RULE], ipv6Prefix: 48 } }));

  it('buckets IPv6 by the configured prefix: a /48 is one budget, wherever its /64s are', async () => {
    expect(await statuses(h, ['2001:db8:7:1::1', '2001:db8:7:2::1', '2001:db8:7:ffff::1', '2001:db8:7:3::1'])).toEqual([200, 200, 200, 429]);
    expect(await statuses(h, ['2001:db8:8::1'])).toEqual([200]);
    // IPv4 stays one address per budget.
    expect(await statuses(h, ['6.6.6.1', '6.6.6.2'])).toEqual([200, 200]);
  });
});
