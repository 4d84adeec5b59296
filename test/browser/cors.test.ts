/**
 * A real browser (Debian's headless Chromium, driven by playwright-core) on a page of another
 * origin calls sluice with fetch(), as browser SDKs do: it reads every status and body, and the
 * fields that say when to retry (`Retry-After`, `RateLimit`, `RateLimit-Policy`) and the request id,
 * which a page can read only when the answer exposes them.
 *
 * Without Chromium the test is skipped with a warning (.ci/run installs it, and says so when it
 * cannot).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { startHarness, type Harness } from '../support/harness.js';
import { findOnPath } from '../support/redis.js';

const CHROMIUM = process.env.SLUICE_TEST_CHROMIUM ?? findOnPath('chromium');
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

if (!CHROMIUM) {
  console.warn(
    '\n*** test/browser/cors.test.ts SKIPPED: no `chromium` on PATH (Debian: apt-get install -y chromium; .ci/run installs it). ' +
      'The CORS fields are then checked only without a browser (test/hostile/relay-parity.test.ts). ***\n',
  );
}

/** What the page reads of one answer. */
interface Seen {
  status: number;
  body: string;
  retryAfter: string | null;
  rateLimit: string | null;
  rateLimitPolicy: string | null;
  requestId: string | null;
}

const PER_MINUTE = 3;

describe.skipIf(!CHROMIUM)(`a page on another origin, in headless Chromium${CHROMIUM ? '' : ' (SKIPPED: no chromium)'}`, () => {
  let h: Harness;
  let pageServer: Server;
  let pageOrigin: string;
  let profile: string;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    h = await startHarness({ store: 'memory', file: { freeTier: { perMinute: PER_MINUTE } } });
    // The page's own origin: another loopback address and port than sluice's.
    pageServer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>browser client</title><p>a page that calls the gateway</p>');
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.2', resolve));
    const addr = pageServer.address();
    if (addr === null || typeof addr === 'string') throw new Error('page server has no address');
    pageOrigin = `http://127.0.0.2:${addr.port}`;

    const { chromium } = await import('playwright-core');
    profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM!, headless: true, args: FLAGS, timeout: 15_000 });
    page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${pageOrigin}/`);
  }, 30_000);

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await new Promise<void>((resolve) => (pageServer ? pageServer.close(() => resolve()) : resolve()));
    await h?.close();
  });

  /** fetch() from the page, as a browser SDK calls the API (Authorization and a JSON body: a preflighted call). */
  function call(key: string, model: string): Promise<Seen> {
    return page.evaluate(
      async ({ url, key, model }) => {
        const r = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
        });
        return {
          status: r.status,
          body: await r.text(),
          retryAfter: r.headers.get('retry-after'),
          rateLimit: r.headers.get('ratelimit'),
          rateLimitPolicy: r.headers.get('ratelimit-policy'),
          requestId: r.headers.get('x-oneapi-request-id'),
        };
      },
      { url: `${h.url}/v1/chat/completions`, key, model },
    );
  }

  it("reads a paid 200, a wrong key's 401 with its request id, and the free tier's 429 with Retry-After and the RateLimit fields", async () => {
    expect(new URL(h.url).origin).not.toBe(pageOrigin);
    const { key } = await h.createKey('browser-user');

    const paid = await call(key, 'vend-flash');
    expect(paid.status).toBe(200);
    expect(JSON.parse(paid.body)).toMatchObject({ object: 'chat.completion' });

    const wrong = await call('sk-this-key-does-not-exist-0123456789', 'vend-flash');
    expect(wrong.status).toBe(401);
    const err = JSON.parse(wrong.body) as { error: { type: string; message: string } };
    expect(err.error.type).toBe('new_api_error');
    // The id the message quotes, readable from the header too.
    expect(wrong.requestId).not.toBeNull();
    expect(err.error.message).toContain(`(request id: ${wrong.requestId})`);

    // Free calls the relay answers: the RateLimit fields sluice adds are readable too.
    const free: Seen[] = [];
    for (let i = 0; i < PER_MINUTE; i++) free.push(await call(key, 'vend-flash-free'));
    expect(free.map((s) => s.status)).toEqual(Array(PER_MINUTE).fill(200));
    expect(free.at(-1)!.rateLimitPolicy).toMatch(new RegExp(`^"?[\\w-]+"?;q=${PER_MINUTE};w=60`));
    expect(free.at(-1)!.rateLimit).toMatch(/;r=0;t=\d+/);

    const limited = await call(key, 'vend-flash-free');
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.body)).toMatchObject({ error: { code: 'free_tier_rate_limited' } });
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    expect(Number(limited.retryAfter)).toBeLessThanOrEqual(60);
    expect(limited.rateLimit).toMatch(/;r=0;t=\d+/);
    expect(limited.rateLimitPolicy).not.toBeNull();
    expect(limited.requestId).not.toBeNull();
  }, 20_000);
});
