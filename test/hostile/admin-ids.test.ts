/**
 * Ids on the admin API (issue 25, item 9): every route that takes a user id or a key id, in a path
 * segment, a query or a body, holds it to the documented rule (1-128 of `[A-Za-z0-9_.@:+-]`, after
 * percent-decoding) and refuses anything else with 400 in the admin error shape, without repeating
 * the id back. The requests go as raw bytes, as an attacker would write them.
 */
import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, useHarness } from '../support/harness.js';
import { finalStatus, openRaw, rawConnections } from './raw.js';

interface Answer {
  status: number;
  body: string;
}

describe('admin ids: one rule on every route', () => {
  const h = useHarness({ store: 'redis' });
  const open = rawConnections();

  /** One request written byte for byte (the target as given, not re-encoded) and its answer. */
  async function raw(method: string, target: string | Buffer, body?: string): Promise<Answer> {
    const head = Buffer.concat([
      Buffer.from(`${method} `),
      Buffer.isBuffer(target) ? target : Buffer.from(target, 'latin1'),
      Buffer.from(
        ` HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nConnection: close\r\n` +
          (body === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
      ),
    ]);
    const c = await openRaw(Number(new URL(h.adminUrl).port), head);
    open.push(c);
    const text = await c.waitFor(/\r\n\r\n[\s\S]*\}$/, 5000);
    return { status: finalStatus(text), body: Buffer.from(text.slice(text.indexOf('\r\n\r\n') + 4), 'latin1').toString('utf8') };
  }

  const long = 'u'.repeat(300);
  /** Path segments as sent, and what they decode to, none of them a valid id. */
  const BAD_SEGMENTS: Array<[sent: string, decoded: string]> = [
    ['a}b{c', 'a}b{c'],
    ['%7Bu%3Aalice%7D', '{u:alice}'],
    ['%00', '\0'],
    ['a%00b', 'a\0b'],
    [long, long],
    ['a%2Fb', 'a/b'],
    ['%2F', '/'],
    ['caf%C3%A9', 'café'],
    ['%EF%BD%81', 'ａ'],
    ['a%20b', 'a b'],
    ['%20', ' '],
    ['a%0D%0Ab', 'a\r\nb'],
  ];

  function expectRefused(r: Answer, code: string, sent: string, decoded: string): void {
    expect(r.status, `${sent}: ${r.body}`).toBe(400);
    const parsed = JSON.parse(r.body) as { error: { code: string; message: string } };
    expect(Object.keys(parsed)).toEqual(['error']);
    expect(Object.keys(parsed.error)).toEqual(['code', 'message']);
    expect(parsed.error.code).toBe(code);
    expect(parsed.error.message).toMatch(/1-128 characters of letters, digits and _ \. @ : \+ -/);
    // The bad id is never echoed, decoded or as sent.
    for (const form of [decoded, JSON.stringify(decoded).slice(1, -1), sent]) if (form.trim().length >= 3) expect(r.body).not.toContain(form);
  }

  it.each(BAD_SEGMENTS)('GET /admin/users/%s/limits answers 400 invalid_user', async (sent, decoded) => {
    expectRefused(await raw('GET', `/admin/users/${sent}/limits`), 'invalid_user', sent, decoded);
  });

  it.each(BAD_SEGMENTS)('GET /admin/keys?user=%s answers 400 invalid_user', async (sent, decoded) => {
    expectRefused(await raw('GET', `/admin/keys?user=${sent}`), 'invalid_user', sent, decoded);
  });

  it.each(BAD_SEGMENTS)('DELETE /admin/keys/%s answers 400 invalid_key_id', async (sent, decoded) => {
    expectRefused(await raw('DELETE', `/admin/keys/${sent}`), 'invalid_key_id', sent, decoded);
  });

  it('refuses raw bytes beyond ASCII in the request line at the HTTP parser: a bare 400, nothing echoed', async () => {
    for (const [method, prefix, suffix] of [
      ['GET', '/admin/users/', '/limits'],
      ['GET', '/admin/keys?user=', ''],
      ['DELETE', '/admin/keys/', ''],
    ] as const) {
      const r = await raw(method, Buffer.concat([Buffer.from(prefix), Buffer.from('café', 'utf8'), Buffer.from(suffix)]));
      expect([r.status, r.body]).toEqual([400, '']);
    }
  });

  it.each(BAD_SEGMENTS.filter(([sent]) => !sent.includes('%')))('POST /admin/keys {"user":%j} answers 400 invalid_user', async (sent, decoded) => {
    expectRefused(await raw('POST', '/admin/keys', JSON.stringify({ user: decoded })), 'invalid_user', sent, decoded);
  });

  it('takes every id within the rule on every route, 128 characters and all the allowed punctuation included', async () => {
    for (const user of ['u'.repeat(128), 'a+b@c.d:e-f_G9', '%61lice']) {
      const decoded = decodeURIComponent(user);
      const created = await raw('POST', '/admin/keys', JSON.stringify({ user: decoded }));
      expect(created.status, created.body).toBe(201);
      const id = (JSON.parse(created.body) as { id: string }).id;
      const limits = await raw('GET', `/admin/users/${user.replace('+', '%2B')}/limits`);
      expect(limits.status, limits.body).toBe(200);
      expect((JSON.parse(limits.body) as { freeTier: { user: string } }).freeTier.user).toBe(decoded);
      const listed = await raw('GET', `/admin/keys?user=${user.replace('+', '%2B')}`);
      expect((JSON.parse(listed.body) as { keys: Array<{ id: string }> }).keys.map((k) => k.id)).toEqual([id]);
      expect((await raw('DELETE', `/admin/keys/${id}`)).status).toBe(204);
    }
    // One past the bound is refused.
    expect((await raw('GET', `/admin/users/${'u'.repeat(129)}/limits`)).status).toBe(400);
  });
});
