/**
 * Hostile traffic, round two (issue 25, item 4): the config file is read only as a regular file of
 * at most 1 MiB, without blocking the event loop. Swapping the file behind the `..data` symlink for
 * a FIFO froze the process (`readFileSync` waited in `open` for a writer; /healthz timed out); a
 * 30 MB file held the event loop for seconds while it was parsed. Each is now a failed reload,
 * logged and counted once, and the running config stays. sluice runs as its own process, reading
 * a ConfigMap-style mount, and its /healthz is timed throughout.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { ConfigMapDir } from '../support/configmap.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { CHILD_ADMIN_TOKEN, startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { eventually, sleep } from '../support/time.js';

const MiB = 1024 * 1024;

/** A file of `bytes` bytes listing free models: valid YAML, slow to parse when large. */
function hugeConfig(bytes: number): string {
  const head = 'freeTier:\n  models:\n';
  const line = (i: number): string => `    - m-${String(i).padStart(8, '0')}\n`;
  return head + Array.from({ length: Math.ceil((bytes - head.length) / line(0).length) }, (_, i) => line(i)).join('');
}

/** Just under 1 MiB of flow collections: within the read bound, yet seconds and over 100 MB of heap to parse. */
function slowToParse(): string {
  const item = '{"a":[1,2,{"b":"c"}]},';
  return 'x: [' + item.repeat(Math.floor((MiB - 16) / item.length)) + '1]\n';
}

describe('the config file behind a ConfigMap symlink (sluice as its own process)', () => {
  let relay: RelayStandin;
  let child: ChildSluice;
  let cm: ConfigMapDir;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    cm = new ConfigMapDir('freeTier:\n  perMinute: 20\n');
    child = await startChildSluice({ relayUrl: relay.url, env: { SLUICE_CONFIG: cm.path } });
  });
  afterAll(async () => {
    await child?.close();
    await relay?.close();
    cm?.remove();
  });

  const failures = async (): Promise<number> => metricValue(await metricsText(child), 'sluice_config_reloads_total', { result: 'failure' }) ?? 0;
  const successes = async (): Promise<number> => metricValue(await metricsText(child), 'sluice_config_reloads_total', { result: 'success' }) ?? 0;
  const perMinute = async (): Promise<number> =>
    ((await (await fetch(`${child.adminUrl}/admin/config`, { headers: { authorization: `Bearer ${CHILD_ADMIN_TOKEN}` } })).json()) as { freeTier: { perMinute: number } }).freeTier
      .perMinute;
  const rejections = (): string[] =>
    child
      .lines()
      .filter((l) => l.msg === 'config reload rejected; keeping the running config')
      .map((l) => String(l.err));
  /** The reason logged for the rejection after the first `seen` (log lines are held up to 50 ms). */
  function rejection(seen: number): Promise<string> {
    return eventually(() => rejections()[seen] ?? false, { timeoutMs: 2000, intervalMs: 20, what: 'the rejection to be logged' });
  }

  /**
   * /healthz, asked every 100 ms for `ms` (each answer given at most 1 s): the slowest answer's
   * time, Infinity if one did not come.
   */
  async function slowestHealthz(ms: number, until: () => Promise<boolean> = async () => false): Promise<number> {
    let slowest = 0;
    for (const end = Date.now() + ms; Date.now() < end; ) {
      const t0 = performance.now();
      try {
        const r = await fetch(`${child.adminUrl}/healthz`, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        if (r.status !== 200) return Infinity;
      } catch {
        return Infinity;
      }
      slowest = Math.max(slowest, performance.now() - t0);
      if (await until()) break;
      await sleep(100);
    }
    return slowest;
  }

  it('a FIFO swapped in: /healthz stays fast, the reload fails once (logged and counted), the running config stays', async () => {
    expect(await failures()).toBe(0);
    const seen = rejections().length;
    cm.writeFifo();
    // The watch fires at once, the poll within a second: the failure is counted within 3 s.
    const slowest = await slowestHealthz(3000, async () => (await failures()) >= 1);
    expect(slowest, 'slowest /healthz answer (ms)').toBeLessThan(1000);
    expect(await failures()).toBe(1);
    expect(await rejection(seen)).toMatch(/is a FIFO, not a regular file/);
    // Reported once while it stays, and the process keeps its config and keeps answering.
    expect(await slowestHealthz(1500)).toBeLessThan(1000);
    expect(await failures()).toBe(1);
    expect(rejections()).toHaveLength(seen + 1);
    expect(await perMinute()).toBe(20);
  });

  it('a 30 MB file: refused unread, without holding the event loop; the running config stays', async () => {
    const before = await failures();
    const seen = rejections().length;
    cm.write(hugeConfig(30 * MiB));
    const slowest = await slowestHealthz(3000, async () => (await failures()) > before);
    expect(slowest, 'slowest /healthz answer (ms)').toBeLessThan(1000);
    expect(await failures()).toBe(before + 1);
    expect(await rejection(seen)).toMatch(/is 3\d{7} bytes, over the 1048576 bytes \(1 MiB\)/);
    expect(await perMinute()).toBe(20);
  });

  it('a file within 1 MiB that is slow to parse is parsed off the event loop, and refused past its time or memory bound', async () => {
    const before = await failures();
    const seen = rejections().length;
    cm.write(slowToParse());
    const slowest = await slowestHealthz(9000, async () => (await failures()) > before);
    expect(slowest, 'slowest /healthz answer (ms)').toBeLessThan(1000);
    expect(await failures()).toBe(before + 1);
    expect(await rejection(seen)).toMatch(/needs more than 64 MB to parse|took more than 5 s to parse/);
    expect(await perMinute()).toBe(20);
  });

  it('a valid file afterwards is applied', async () => {
    cm.write('freeTier:\n  perMinute: 3\n');
    await eventually(async () => expect(await perMinute()).toBe(3), { timeoutMs: 3000, intervalMs: 50 });
    expect(await successes()).toBe(1);
  });
});

describe('at start-up', () => {
  let relay: RelayStandin;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
  });
  afterAll(async () => {
    await relay?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a FIFO or a file over 1 MiB stops sluice with exit 78 and a message that says why', async () => {
    const fifo = join(dir, 'fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    await expect(startChildSluice({ relayUrl: relay.url, env: { SLUICE_CONFIG: fifo } })).rejects.toThrow(
      /exit 78\).*configuration error: config file \S+ is a FIFO, not a regular file/,
    );
    const big = join(dir, 'big.yaml');
    writeFileSync(big, hugeConfig(2 * MiB));
    await expect(startChildSluice({ relayUrl: relay.url, env: { SLUICE_CONFIG: big } })).rejects.toThrow(/exit 78\).*config file \S+ is \d+ bytes, over the 1048576 bytes/);
  });
});
