/**
 * Small assertion helpers shared by the relay stand-in's own tests (src/demo/relay.test.ts) and
 * the SDK conformance suite: what the stand-in recorded, and the rejection of a promise.
 */
import { expect } from 'vitest';
import type { RecordedRequest, RelayStandin } from '../../src/demo/relay.js';

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
