/** The requests every scenario sends. */
import type { Server } from './proc.js';

export const CHAT_PATH = '/v1/chat/completions';
const body = (model: string): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }] });
/** A paid model: no Redis round trip in sluice. */
export const PAID_BODY = body('gpt-4o-mini');
/** A free model (the `-free` suffix): one free-tier decision per call. */
export const FREE_BODY = body('vend-flash-free');
/** Sent to the servers that do not authenticate too, so every variant carries the same bytes. */
export const DUMMY_KEY = 'sk-' + 'x'.repeat(48);

/** The keys a load rotates over: sluice's own, or the dummy key. */
export function keysOf(s: Server): string[] {
  return s.keys.length ? s.keys : [DUMMY_KEY];
}

export function chatUrl(s: Server): string {
  return `http://127.0.0.1:${s.port}${CHAT_PATH}`;
}

/** One request, which must be answered `status` (a variant that does not answer as it should is not measured). */
export async function expectStatus(s: Server, requestBody: string, status = 200, key = keysOf(s)[0]!): Promise<void> {
  const r = await fetch(chatUrl(s), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: requestBody,
    signal: AbortSignal.timeout(5000),
  });
  await r.arrayBuffer();
  if (r.status !== status) throw new Error(`${s.name}: answered ${r.status} to a sanity request, not ${status}\n${s.tail()}`);
}
