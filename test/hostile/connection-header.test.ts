/**
 * Hostile traffic, round two (issue 25, item 6): a `Connection` header that names a field sluice
 * judges the request by. `Connection: close, content-type` made sluice read the model from the JSON
 * body, then drop Content-Type as hop-by-hop, so the relay saw another request than the one sluice
 * judged. Such a request gets 400 invalid_request and nothing is forwarded; ordinary Connection
 * headers still pass. Bytes are written on raw sockets exactly as a client would.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../support/harness.js';
import { freshUser, usedToday } from '../support/helpers.js';
import { answerJson, finalStatus, openRaw, rawConnections } from './raw.js';

const FREE = 'vend-flash-free';

describe('a Connection header naming a field sluice judges by', () => {
  const h = useHarness({ store: 'memory' });
  const open = rawConnections();

  /** One request on its own raw connection; the answer once its JSON body is in (or 3 s). */
  async function call(head: string[], body: Buffer | string = ''): Promise<{ status: number; text: string }> {
    const bytes = Buffer.from(body);
    const c = await openRaw(Number(new URL(h.url).port), Buffer.concat([Buffer.from([...head, `Content-Length: ${bytes.length}`, '', ''].join('\r\n')), bytes]));
    open.push(c);
    const text = await c.waitFor(/\r\n\r\n[\s\S]*\}$/, 3000);
    return { status: finalStatus(text), text };
  }

  function expectRefused(r: { status: number; text: string }, field: string): void {
    expect(r.status, r.text).toBe(400);
    const e = answerJson(r.text).error;
    expect(e).toMatchObject({ code: 'invalid_request', type: 'new_api_error' });
    expect(e.message).toContain(`the Connection header names ${field}`);
    expect(e.message).toMatch(/\(request id: \w+\)$/);
  }

  it('refuses `Connection: close, content-type` on a free-model JSON body (the issue reproduction): 400, nothing forwarded, nothing counted', async () => {
    const { user, key } = await freshUser(h, 'conn-ct');
    const r = await call(
      ['POST /v1/chat/completions HTTP/1.1', 'Host: sluice', `Authorization: Bearer ${key}`, 'Content-Type: application/json', 'Connection: close, content-type'],
      JSON.stringify({ model: FREE, messages: [] }),
    );
    expectRefused(r, 'content-type');
    expect(h.relay.started).toBe(0);
    expect(await usedToday(h, user)).toBe(0);
  });

  it('refuses `Connection: content-encoding` on a gzip body', async () => {
    const { key } = await freshUser(h, 'conn-ce');
    const r = await call(
      [
        'POST /v1/chat/completions HTTP/1.1',
        'Host: sluice',
        `Authorization: Bearer ${key}`,
        'Content-Type: application/json',
        'Content-Encoding: gzip',
        'Connection: content-encoding',
      ],
      gzipSync(JSON.stringify({ model: FREE })),
    );
    expectRefused(r, 'content-encoding');
    expect(h.relay.started).toBe(0);
  });

  it.each([
    ['host', 'Connection: host'],
    ['content-length', 'Connection: keep-alive, Content-Length'],
    ['transfer-encoding', 'Connection: transfer-encoding'],
    ['authorization', 'Connection: Authorization'],
    ['x-api-key', 'Connection: x-api-key'],
    ['x-goog-api-key', 'Connection: x-goog-api-key'],
    ['origin', 'Connection: origin'],
  ])('refuses a Connection header naming %s, whatever its case or place in the list', async (field, connection) => {
    const { key } = await freshUser(h, 'conn-any');
    const r = await call(
      ['POST /v1/messages HTTP/1.1', 'Host: sluice', `x-api-key: ${key}`, 'Origin: https://app.example', 'Content-Type: application/json', connection, 'Connection: close'],
      JSON.stringify({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [] }),
    );
    expectRefused(r, field);
    expect(h.relay.started).toBe(0);
  });

  it('passes ordinary Connection headers: keep-alive, close, upgrade, a custom field (which the relay does not get)', async () => {
    const { key } = await freshUser(h, 'conn-ok');
    const body = JSON.stringify({ model: 'gpt-4o', messages: [] });
    for (const extra of [['Connection: keep-alive'], ['Connection: close'], ['Connection: Upgrade', 'Upgrade: websocket'], ['Connection: x-trace, close', 'X-Trace: 1']]) {
      h.relay.reset();
      const r = await call(['POST /v1/chat/completions HTTP/1.1', 'Host: sluice', `Authorization: Bearer ${key}`, 'Content-Type: application/json', ...extra], body);
      expect({ extra, status: r.status }).toEqual({ extra, status: 200 });
      const seen = h.relay.requests[0]!;
      expect(seen.model).toBe('gpt-4o');
      expect(seen.headers['content-type']).toBe('application/json');
      expect(seen.headers['x-trace']).toBeUndefined();
      expect(seen.headers.upgrade).toBeUndefined();
    }
  });
});
