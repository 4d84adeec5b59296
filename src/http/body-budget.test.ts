import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyBudget } from './body-budget.js';
import { readBody } from './body.js';

function request(chunks: Buffer[], headers: Record<string, string> = {}, end = true): IncomingMessage {
  const r = new Readable({ read() {} }) as unknown as IncomingMessage & { complete: boolean };
  r.headers = headers;
  r.complete = end;
  for (const c of chunks) r.push(c);
  if (end) r.push(null);
  return r;
}

const chunksOf = (size: number, n: number): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.alloc(size, 0x61 + (i % 26)));

describe('BodyBudget leases', () => {
  it('name the bound that leaves an address less room: its share, or the whole budget', () => {
    const budget = new BodyBudget(100, 50);
    expect(budget.lease('a').take(40)).toBe(true);
    // a's share has 10 left, the budget 60: a's share is the tighter.
    expect(budget.freeFor('a')).toBe(10);
    expect(budget.tighterBound('a')).toBe('address_share');
    expect(budget.lease('b').take(50)).toBe(true);
    // The budget has 10 left, as has a's share: the budget is what is full.
    expect(budget.tighterBound('a')).toBe('budget_full');
    expect(budget.tighterBound('c')).toBe('budget_full');
  });

  it('take what fits, refuse what does not (taking nothing), and give back exactly what they hold', () => {
    const budget = new BodyBudget(100);
    const a = budget.lease('client');
    const b = budget.lease('client');
    expect(a.take(60)).toBe(true);
    expect(b.fits(40)).toBe(true);
    expect(b.fits(41)).toBe(false);
    expect(b.take(41)).toBe(false);
    expect(budget.used).toBe(60);
    expect(b.take(40)).toBe(true);
    expect(budget.free).toBe(0);
    a.give(10);
    expect([a.held, budget.used]).toEqual([50, 90]);
    // Never more than is held.
    a.give(1000);
    expect([a.held, budget.used]).toEqual([0, 40]);
    b.release();
    b.release();
    expect(budget.used).toBe(0);
  });

  it('follow a lowered limit: nothing is taken back, new takes wait for room', () => {
    const budget = new BodyBudget(100);
    const a = budget.lease('client');
    a.take(80);
    budget.limit = 50;
    expect(budget.lease('client').take(1)).toBe(false);
    a.release();
    expect(budget.lease('client').take(50)).toBe(true);
  });
});

describe('BodyBudget per client address', () => {
  it('lets one address hold at most its share; another address still has the rest', () => {
    const budget = new BodyBudget(100, 50);
    const a1 = budget.lease('10.0.0.1');
    const a2 = budget.lease('10.0.0.1');
    expect(a1.take(30)).toBe(true);
    expect(budget.freeFor('10.0.0.1')).toBe(20);
    expect(a2.fits(21)).toBe(false);
    expect(a2.take(21)).toBe(false);
    expect(a2.take(20)).toBe(true);
    // The budget has room (50), the address none.
    expect(budget.lease('10.0.0.1').take(1)).toBe(false);
    const b = budget.lease('10.0.0.2');
    expect(b.take(50)).toBe(true);
    expect(budget.free).toBe(0);
    // What an address gives back is its own again.
    a1.release();
    expect(budget.freeFor('10.0.0.1')).toBe(30);
    expect(budget.lease('10.0.0.1').take(30)).toBe(true);
  });
});

describe('readBody with a lease', () => {
  it('holds exactly the bytes received, for a body held as its chunks', async () => {
    const budget = new BodyBudget(1 << 20);
    const lease = budget.lease('client');
    const r = await readBody(request(chunksOf(10_000, 5)), 1 << 20, null, lease);
    expect(r.ok).toBe(true);
    expect(lease.held).toBe(50_000);
    expect(budget.used).toBe(50_000);
    lease.release();
    expect(budget.used).toBe(0);
  });

  it('holds the one buffer of a large declared body, and gives back each chunk as it is moved into it', async () => {
    const budget = new BodyBudget(4 << 20);
    const lease = budget.lease('client');
    const size = 1 << 20;
    const r = await readBody(request(chunksOf(64 * 1024, 16), { 'content-length': String(size) }), 2 << 20, null, lease);
    expect(r.ok && r.body.length).toBe(size);
    expect(lease.held).toBe(size);
  });

  it('needs room for its length, no more, while a large body moves into one buffer; a byte less is busy', async () => {
    const size = 1 << 20;
    const fits = new BodyBudget(size);
    const lease = fits.lease('client');
    const r = await readBody(request(chunksOf(64 * 1024, 16), { 'content-length': String(size) }), 2 << 20, null, lease);
    expect(r.ok && r.body.length).toBe(size);
    expect(lease.held).toBe(size);
    const short = new BodyBudget(size - 1);
    expect(await readBody(request(chunksOf(64 * 1024, 16), { 'content-length': String(size) }), 2 << 20, null, short.lease('client'))).toEqual({ ok: false, reason: 'busy' });
  });

  it('reads a body of any size up to maxBodyBytes from one address at the defaults (its share: half of 64 MiB, at least 32 MiB)', async () => {
    const MiB = 1024 * 1024;
    // Before, the chunks and the one buffer were counted at once: 1.5 times the length, so 22 to 32 MiB never fit the share.
    for (const mib of [22, 30, 32]) {
      const budget = new BodyBudget(64 * MiB, 32 * MiB);
      const r = await readBody(request(chunksOf(64 * 1024, mib * 16), { 'content-length': String(mib * MiB) }), 32 * MiB, null, budget.lease('client'));
      expect(r.ok && r.body.length, `${mib} MiB`).toBe(mib * MiB);
    }
  });

  it('refuses a declared length that does not fit before reading anything, and a chunk that does not fit as it comes', async () => {
    const budget = new BodyBudget(100_000);
    const other = budget.lease('client');
    other.take(60_000);
    const unread = request(chunksOf(50_000, 1), { 'content-length': '50000' });
    const lease = budget.lease('client');
    expect(await readBody(unread, 1 << 20, null, lease)).toEqual({ ok: false, reason: 'busy' });
    expect(lease.held).toBe(0);
    expect((unread as unknown as Readable).readableLength).toBe(50_000); // not a byte read
    // No declared length: read until a chunk would not fit.
    const chunked = budget.lease('client');
    expect(await readBody(request(chunksOf(15_000, 4)), 1 << 20, null, chunked)).toEqual({ ok: false, reason: 'busy' });
    expect(chunked.held).toBe(30_000);
    expect(budget.used).toBe(90_000);
  });

  it('is never refused for the size limit and the budget both: the size limit is judged first', async () => {
    const budget = new BodyBudget(10);
    expect(await readBody(request([], { 'content-length': '1000' }), 100, null, budget.lease('client'))).toEqual({ ok: false, reason: 'too_large' });
  });
});
