/**
 * The log's reader dies (a log collector crashed, a pipe closed): sluice keeps serving, and the
 * lines it can no longer write are counted where an alert sees them
 * (sluice_log_bytes_dropped_total, alert SluiceLogLinesDropped).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { metric, startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { request } from '../support/http.js';
import { eventually } from '../support/time.js';

describe("stdout's reader gone", () => {
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

  /** `n` paid calls, each answered 200. */
  async function serve(key: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const r = await request(child.url, 'POST', '/v1/chat/completions', {
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(r.status, r.text).toBe(200);
    }
  }

  it('keeps serving, and counts every access line it could not write', async () => {
    const key = await child.createKey('log-gone');
    await serve(key, 5);
    expect(await metric(child.adminUrl, 'sluice_log_bytes_dropped_total')).toBe(0);
    const written = child.stdout().bytes;
    expect(written).toBeGreaterThan(0);

    child.closeStdout();
    await serve(key, 20);
    // Each access line is some 300-500 bytes; the first failed write and every line after it are counted.
    const first = await eventually(
      async () => {
        const n = (await metric(child.adminUrl, 'sluice_log_bytes_dropped_total')) ?? 0;
        if (n < 20 * 200) throw new Error(`dropped ${n} bytes`);
        return n;
      },
      { timeoutMs: 5000, what: 'the dropped lines counted' },
    );
    await serve(key, 20);
    await eventually(
      async () => {
        const n = (await metric(child.adminUrl, 'sluice_log_bytes_dropped_total')) ?? 0;
        if (n < first + 20 * 200) throw new Error(`dropped ${n} bytes`);
      },
      { timeoutMs: 5000, what: 'the next lines counted' },
    );
    expect(child.stdout().bytes).toBe(written);
  });
});
