import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../config/error.js';
import { DRAIN_DONE_FILE, DRAIN_REQUEST_FILE, DrainHook } from './drain-hook.js';
import { sleep } from '../../test/support/time.js';

const log = pino({ level: 'silent' });

const dirs: string[] = [];
const hooks: DrainHook[] = [];
afterEach(() => {
  for (const h of hooks.splice(0)) h.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sluice-drain-hook-'));
  dirs.push(d);
  return d;
}

/** A drain the test ends by hand, counting how often it was asked for. */
function manualDrain(): { drain: () => Promise<{ forced: number }>; asked: () => number; finish: (forced: number) => void } {
  let asked = 0;
  let finish: (forced: number) => void = () => undefined;
  const done = new Promise<{ forced: number }>((r) => (finish = (forced) => r({ forced })));
  return {
    drain: () => {
      asked++;
      return done;
    },
    asked: () => asked,
    finish: (forced) => finish(forced),
  };
}

function watch(dir: string, drain: () => Promise<{ forced: number }>, released: () => void = () => {}): DrainHook {
  const h = new DrainHook({ dir, drain, log, released, pollMs: 20 });
  hooks.push(h);
  h.start();
  return h;
}

describe('the drain hook (sluice side of the Pod shutdown hook)', () => {
  it('refuses at start-up a drainDir that is missing or not a directory (a Pod whose rollouts would cut every stream)', () => {
    const dir = tempDir();
    expect(() => new DrainHook({ dir: join(dir, 'missing'), drain: manualDrain().drain, log, released: () => {} })).toThrow(ConfigError);
    writeFileSync(join(dir, 'file'), '');
    expect(() => new DrainHook({ dir: join(dir, 'file'), drain: manualDrain().drain, log, released: () => {} })).toThrow(/drainDir \(SLUICE_DRAIN_DIR\).*must be a directory/);
  });

  it('starts the drain once the request file appears, and answers only when the drain is over', async () => {
    const dir = tempDir();
    const d = manualDrain();
    watch(dir, d.drain);
    // Other names start nothing.
    writeFileSync(join(dir, `${DRAIN_REQUEST_FILE}.tmp`), '');
    await sleep(100);
    expect(d.asked()).toBe(0);
    writeFileSync(join(dir, DRAIN_REQUEST_FILE), '');
    await sleep(100);
    expect(d.asked()).toBe(1);
    // Still draining: no answer yet, so the relay's hook keeps the relay up.
    await sleep(100);
    expect(existsSync(join(dir, DRAIN_DONE_FILE))).toBe(false);
    d.finish(2);
    await sleep(50);
    expect(JSON.parse(readFileSync(join(dir, DRAIN_DONE_FILE), 'utf8'))).toEqual({ forced: 2 });
    expect(d.asked()).toBe(1);
  });

  it('lets go once the hook has returned (it removed its request) after the drain, and not before: a relay restarted in the Pod then finds a fresh sluice', async () => {
    const dir = tempDir();
    const d = manualDrain();
    let released = 0;
    watch(dir, d.drain, () => released++);
    writeFileSync(join(dir, DRAIN_REQUEST_FILE), '');
    await sleep(60);
    d.finish(0);
    await sleep(60);
    expect(existsSync(join(dir, DRAIN_DONE_FILE))).toBe(true);
    // Drained, but the hook is still waiting (its request is there): sluice stays.
    await sleep(60);
    expect(released).toBe(0);
    rmSync(join(dir, DRAIN_REQUEST_FILE));
    await sleep(60);
    expect(released).toBe(1);
    await sleep(60);
    expect(released).toBe(1);
  });

  it('removes an answer left from an earlier run, so that the hook cannot return before this drain', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, DRAIN_DONE_FILE), '{"forced":0}\n');
    const d = manualDrain();
    watch(dir, d.drain);
    expect(existsSync(join(dir, DRAIN_DONE_FILE))).toBe(false);
    await sleep(60);
    expect(d.asked()).toBe(0);
  });

  it('drains at once when it starts with a request already there (restarted while the Pod stops)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, DRAIN_REQUEST_FILE), '');
    const d = manualDrain();
    watch(dir, d.drain);
    await sleep(30);
    expect(d.asked()).toBe(1);
    d.finish(0);
    await sleep(50);
    expect(existsSync(join(dir, DRAIN_DONE_FILE))).toBe(true);
  });
});
