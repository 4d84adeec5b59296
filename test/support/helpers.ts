/**
 * Small assertion helpers shared by the relay stand-in's own tests (demo/relay.test.ts) and
 * the SDK conformance suite: what the stand-in recorded, and the rejection of a promise.
 */
import { expect } from 'vitest';
import { Refusals } from '../../src/answers/refusals.js';
import { ADMIN_TOKEN, type Harness } from './harness.js';
import type { RawResponse } from './http.js';
import type { RecordedRequest, RelayStandin } from '../../demo/relay.js';

/** The rejection of `p`; fails the test when `p` resolves. */
export async function rejectionOf(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  expect.fail('expected the call to fail, it succeeded');
}

/** The newest request the stand-in recorded; throws when it recorded none. */
export function lastRequest(relay: RelayStandin): RecordedRequest {
  const r = relay.requests[relay.requests.length - 1];
  if (!r) throw new Error('the relay stand-in recorded no request');
  return r;
}

/** A recorded request's body parsed as a JSON object. */
export function bodyJson(r: RecordedRequest): Record<string, unknown> {
  return JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
}

export async function metricsText(h: { adminUrl: string }): Promise<string> {
  return (await fetch(`${h.adminUrl}/metrics`)).text();
}

/**
 * The value of the first series `name` whose labels include `labels`; undefined when /metrics
 * exposes no such series (a renamed metric or label must not read as 0).
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = new Map([...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => got.get(k) === v)) return Number(m[3]);
  }
  return undefined;
}

/**
 * Reads one series now and on each later call, for before/after differences in tests that share
 * a sluice (counters are never reset). An absent series reads 0, so a renamed metric or label
 * shows up as a difference of 0 where one was expected.
 */
export function metricReader(h: { adminUrl: string }, name: string, labels: Record<string, string> = {}): () => Promise<number> {
  return async () => metricValue(await metricsText(h), name, labels) ?? 0;
}

let users = 0;

/** A key of a fresh user, so tests never share a free-tier budget. */
export async function freshUser(h: Harness, tag: string): Promise<{ user: string; key: string }> {
  const user = `${tag}-${++users}-${process.pid}`;
  return { user, key: (await h.createKey(user)).key };
}

/** The user's free-tier calls counted today (GET /admin/users/<id>/limits). */
export async function usedToday(h: Harness, user: string): Promise<number> {
  const r = await fetch(`${h.adminUrl}/admin/users/${encodeURIComponent(user)}/limits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return ((await r.json()) as { freeTier: { day: { used: number } } }).freeTier.day.used;
}

/** The contract's 401 (§2): the relay's body, byte for byte but for the request id its header names. */
export function expectContract401(r: RawResponse): void {
  expect(r.status).toBe(401);
  const id = r.headers['x-oneapi-request-id'] as string;
  expect(r.text).toBe(JSON.stringify({ error: { code: '', message: `${Refusals.UNAUTHORIZED.body?.message} (request id: ${id})`, type: 'new_api_error' } }));
}
