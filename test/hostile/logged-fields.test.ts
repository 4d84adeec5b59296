/**
 * Hostile traffic, round two (issue 25, item 3): what a client sends is logged bounded. A 7.7 KB
 * gzip body naming a 7.9 MB model wrote a 7.9 MB access line; 80 of them wrote 632 MB of log and
 * took the process past the Pod's memory limit. (Such a model is now refused unread, past
 * MAX_MODEL_BYTES; the longest model read is still logged bounded.) sluice runs as its own process here, with every
 * access line on, and its stdout is counted byte for byte.
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { LOGGED_FIELD_MAX_CHARS } from '../../src/log/access.js';
import { MAX_MODEL_BYTES } from '../../src/model/scan.js';
import { startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { eventually } from '../support/time.js';

const MiB = 1024 * 1024;

/** One request on its own connection; resolves with the status (0: a connection error). */
function send(port: number, method: string, path: string, headers: http.OutgoingHttpHeaders, body?: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

describe('fields taken from the request are logged bounded (sluice as its own process)', () => {
  let relay: RelayStandin;
  let child: ChildSluice;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true, maxRecorded: 2 });
    child = await startChildSluice({ relayUrl: relay.url, env: { SLUICE_ACCESS_LOG: 'all' } });
  });
  afterAll(async () => {
    await child?.close();
    await relay?.close();
  });

  const accessLines = (): Array<Record<string, unknown>> => child.lines().filter((l) => l.msg === 'request');

  it('a 7.9 MB model in a 7.7 KB gzip body: 400, past the model bound, a short line each, nothing forwarded', async () => {
    const key = await child.createKey('huge-model');
    const body = gzipSync(Buffer.from(`{"model":"${'a'.repeat(7_900_000)}","messages":[]}`), { level: 9 });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length };
    const seen = accessLines().length;
    const before = child.stdout().bytes;
    const started = relay.started;
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await send(child.port, 'POST', '/v1/chat/completions', headers, body));
    expect(statuses).toEqual(Array(20).fill(400));
    expect(relay.started).toBe(started);
    await eventually(() => accessLines().length >= seen + 20, { timeoutMs: 10_000, intervalMs: 50, what: 'every access line' });
    expect(child.stdout().bytes - before, 'bytes of log the requests wrote').toBeLessThan(20 * 1024);
  });

  it(`a gzip body naming a ${MAX_MODEL_BYTES}-byte model, the longest read: 20 of them write a few KB of log, the model cut to 256 characters with its length, and the relay still gets the model whole`, async () => {
    const key = await child.createKey('long-model');
    const modelLength = MAX_MODEL_BYTES;
    // Any valid key and a paid model id: nothing is counted against the free tier.
    const body = gzipSync(Buffer.from(`{"model":"${'a'.repeat(modelLength)}","messages":[]}`), { level: 9 });
    expect(body.length).toBeLessThan(1024);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length };

    const seen = accessLines().length;
    const before = child.stdout().bytes;
    const idle = child.memory().rss;
    const n = 20;
    const statuses: number[] = [];
    let next = 0;
    // Four at a time.
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < n) {
          next++;
          statuses.push(await send(child.port, 'POST', '/v1/chat/completions', headers, body));
        }
      }),
    );
    expect(statuses).toEqual(Array(n).fill(200));
    // What the relay receives is unchanged: it read the whole model from the body.
    expect(relay.requests.at(-1)!.model).toHaveLength(modelLength);

    // Every access line is written within moments (lines are held up to 50 ms).
    await eventually(() => accessLines().length >= seen + n, { timeoutMs: 10_000, intervalMs: 50, what: 'every access line' });
    const written = child.stdout().bytes - before;
    const { peak } = child.memory();
    console.info(
      `[logged fields] ${n} requests of ${body.length} B gzip: ${written} B of log, longest line ${child.stdout().longestLine} B; RSS idle ${(idle / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB`,
    );
    expect(written, 'bytes of log the requests wrote').toBeLessThan(n * 1024);
    const lines = accessLines().slice(seen);
    expect(lines).toHaveLength(n);
    for (const l of lines) {
      expect(l.model).toMatch(new RegExp(`^a+…\\[cut, ${modelLength} chars\\]$`));
      expect((l.model as string).length).toBeLessThanOrEqual(LOGGED_FIELD_MAX_CHARS);
      expect(l).toMatchObject({ decision: 'admitted', status: 200, freeTier: false });
    }
  });

  it('a path of 8 KB is logged cut to 256 characters, with its length', async () => {
    const key = await child.createKey('long-path');
    const path = '/v1beta/models/' + 'g'.repeat(8000) + ':generateContent';
    const seen = accessLines().length;
    expect(await send(child.port, 'POST', path, { 'x-goog-api-key': key, 'content-type': 'application/json' }, Buffer.from('{}'))).toBeGreaterThan(0);
    const line = await eventually(() => accessLines()[seen] ?? false, { timeoutMs: 5000, intervalMs: 50, what: 'the access line' });
    expect(line.path).toMatch(new RegExp(`^/v1beta/models/g+…\\[cut, ${path.length} chars\\]$`));
    expect((line.path as string).length).toBeLessThanOrEqual(LOGGED_FIELD_MAX_CHARS);
    // The model read from that path is the 8000 g's, cut the same way.
    expect(line.model).toMatch(/^g+…\[cut, 8000 chars\]$/);
  });
});
