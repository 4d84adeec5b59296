/**
 * Shared bits of the SDK conformance suite: the models, the clock start, a fetch that counts the
 * attempts an SDK makes (to see its own retries), fresh keys and clients, and the forwarded-auth
 * check. The free-tier setups and checks are in ./free-tier.ts; `rejectionOf`, `lastRequest` and
 * `bodyJson` in test/support/helpers.ts (the relay stand-in's own tests use them too).
 */
import { beforeAll, expect } from 'vitest';
import type { Harness } from '../support/harness.js';
import { freshUser, rejectionOf } from '../support/helpers.js';
import type { RecordedRequest } from '../../demo/relay.js';

/** A free-tier model (id ends in `-free`) and its paid counterpart. */
export const FREE = 'vend-flash-free';
export const PAID = 'vend-flash';

/** One user message, "hi", as the chat and messages APIs take it. */
export const hi = [{ role: 'user' as const, content: 'hi' }];

/** 12:00 Beijing time: a ManualClock started here can move hours without crossing midnight. */
export const BEIJING_NOON = Date.UTC(2026, 2, 10, 4, 0, 0);

/** A key sluice never issued. */
export const BAD_KEY = 'sk-not-a-real-key-0123456789';

/** Each call rejected, as `check` expects. */
export async function expectEachRejected(calls: ReadonlyArray<() => PromiseLike<unknown>>, check: (err: unknown) => void): Promise<void> {
  for (const call of calls) check(await rejectionOf(call()));
}

/** How sluice's error messages end; the id is also in the `x-oneapi-request-id` header. */
export const REQUEST_ID_SUFFIX = / \(request id: ([A-Za-z0-9]+)\)$/;

export interface CountingFetch {
  fetch: typeof fetch;
  /** Each attempt: the URL and the status it got (null when the attempt itself failed). */
  attempts: { url: string; status: number | null; at: number }[];
  /** Response headers of the last attempt that got an answer. */
  lastHeaders: Headers | null;
}

/** A `fetch` to hand to an SDK so a test sees every HTTP attempt it makes, retries included. */
export function countingFetch(): CountingFetch {
  const c: CountingFetch = {
    attempts: [],
    lastHeaders: null,
    fetch: async (input, init) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      const entry = { url, status: null as number | null, at: Date.now() };
      c.attempts.push(entry);
      const res = await globalThis.fetch(input, init);
      entry.status = res.status;
      c.lastHeaders = res.headers;
      return res;
    },
  };
  return c;
}

/** A key of a fresh user (test/support/helpers.ts, freshUser), so tests never share a free-tier budget. */
export async function freshKey(h: Harness, tag: string): Promise<string> {
  return (await freshUser(h, tag)).key;
}

/** A fresh user's key and an SDK client that calls with it. */
export interface KeyedClient<C> {
  key: string;
  sdk: C;
}

/** For the tests of a describe block: a fresh user's key, and the client `make` builds with it, made before they run. */
export function useKeyedClient<C>(h: Harness, tag: string, make: (key: string) => C): KeyedClient<C> {
  const kc = {} as KeyedClient<C>;
  beforeAll(async () => {
    kc.key = await freshKey(h, tag);
    kc.sdk = make(kc.key);
  });
  return kc;
}

/**
 * What the relay must see for a caller with `key`: `Authorization: Bearer <key>`, and the key
 * header the client used, if any, holding the same key (new-api chooses answer formats by it);
 * whichever the relay reads, it authenticates `key`.
 */
export function expectForwardedAuth(r: RecordedRequest, key: string, used: 'authorization' | 'x-api-key' | 'x-goog-api-key' = 'authorization'): void {
  expect(r.headers['authorization']).toBe(`Bearer ${key}`);
  expect(r.headers['x-api-key']).toBe(used === 'x-api-key' ? key : undefined);
  expect(r.headers['x-goog-api-key']).toBe(used === 'x-goog-api-key' ? key : undefined);
  expect(r.key).toBe(key);
}
