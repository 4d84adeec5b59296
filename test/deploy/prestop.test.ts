/**
 * The Pod's shutdown end to end, with real processes on loopback: sluice as its own process in
 * front of the relay stand-in, a stream in flight, and the relay's preStop hook run exactly as
 * kubelet runs it (the command of deploy/base/deployment.yaml, by /bin/sh, with a temporary
 * directory standing for the volume the two containers share). The hook must return only once
 * sluice has nothing in flight toward the relay: a stream that ends within drainSeconds arrives
 * whole before the relay could stop; one that does not is cut at the bound, by sluice, and said so
 * (`drain_deadline`). Then SIGTERM, as Kubernetes sends it to the sidecar last, ends sluice at once.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { STANDIN_TEXT, startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { DRAIN_DONE_FILE, DRAIN_REQUEST_FILE } from '../../src/runtime/drain-hook.js';
import { CHILD_ADMIN_TOKEN, startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { expandK8s, parseManifests, ROOT, SHUTDOWN_BUDGET, shutdownHook, sluicePod, type ShutdownHook } from './k8s.js';
import { eventually } from '../support/time.js';

/** The relay's preStop hook as the base Deployment states it (no kubectl needed: the file is plain YAML). */
function manifestHook(): { hook: ShutdownHook; relayEnv: Record<string, string> } {
  const objects = parseManifests(readFileSync(join(ROOT, 'deploy/base/deployment.yaml'), 'utf8'), 'deploy/base/deployment.yaml');
  const { pod, sidecar, relay } = sluicePod(objects);
  const relayEnv = Object.fromEntries((relay.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
  return { hook: shutdownHook(pod, sidecar, relay, DRAIN_REQUEST_FILE, DRAIN_DONE_FILE), relayEnv };
}

/** Runs the hook as kubelet would, on `dir` in place of the shared volume; resolves with its exit code and when it exited. */
function runHook(dir: string): { exited: Promise<{ code: number | null; at: number }>; kill: () => void } {
  const { hook, relayEnv } = manifestHook();
  const mount = hook.relayPath.replace(/\/$/, '');
  const [bin, ...args] = hook.command.map((a) => expandK8s(a, relayEnv).split(mount).join(dir));
  const child = spawn(bin!, args, { stdio: 'ignore' });
  return {
    exited: new Promise((r) => child.once('exit', (code) => r({ code, at: Date.now() }))),
    kill: () => child.kill('SIGKILL'),
  };
}

interface StreamEnd {
  /** res.complete: the chunked body ended properly. */
  complete: boolean;
  /** The text deltas, concatenated. */
  text: string;
  events: number;
  done: boolean;
  at: number;
}

/** A streamed chat completion through sluice; `started` resolves with the first event. */
function openStream(url: string, key: string): { started: Promise<void>; ended: Promise<StreamEnd> } {
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const ended = new Promise<StreamEnd>((resolve) => {
    const req = http.request(
      `${url}/v1/chat/completions`,
      { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
          started();
        });
        const finish = (): void => {
          const data = [...body.matchAll(/^data: (.*)$/gm)].map((m) => m[1]!);
          let text = '';
          for (const d of data) {
            if (d === '[DONE]') continue;
            const delta = (JSON.parse(d) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content;
            text += delta ?? '';
          }
          resolve({ complete: res.complete, text, events: data.length, done: data.at(-1) === '[DONE]', at: Date.now() });
        };
        res.on('close', finish);
      },
    );
    req.on('error', () => resolve({ complete: false, text: '', events: 0, done: false, at: Date.now() }));
    req.end('{"model":"gpt-4o","stream":true}');
  });
  return { started: startedP, ended };
}

/** When /readyz first answered 503 (the drain began), polled every 50 ms; throws after `ms`. */
async function notReadyWithin(adminUrl: string, ms: number): Promise<number> {
  return eventually(
    async () => {
      const r = await fetch(`${adminUrl}/readyz`);
      await r.arrayBuffer();
      return r.status === 503 && Date.now();
    },
    { timeoutMs: ms, intervalMs: 50, what: "sluice to start draining after the hook's start" },
  );
}

function connectionRefused(url: string): Promise<string> {
  return new Promise((resolve) => {
    http
      .get(`${url}/v1/models`, { agent: false }, (res) => {
        res.resume();
        resolve(`answered ${res.statusCode}`);
      })
      .on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

interface Setup {
  sluice: ChildSluice;
  relay: RelayStandin;
  dir: string;
  key: string;
}

async function setUp(drainSeconds: number, deltas: number, cleanup: (fn: () => Promise<void> | void) => void): Promise<Setup> {
  const relay = await startRelayStandin({ quiet: true });
  cleanup(() => relay.close());
  // One event a second: a stream of deltas + 3 events lasts deltas + 2 seconds.
  relay.behave(() => true, { sseIntervalMs: 1000, sseEvents: deltas });
  const dir = mkdtempSync(join(tmpdir(), 'sluice-prestop-'));
  cleanup(() => rmSync(dir, { recursive: true, force: true }));
  const sluice = await startChildSluice({ relayUrl: relay.url, config: { drainSeconds }, env: { SLUICE_DRAIN_DIR: dir, SLUICE_ACCESS_LOG: 'all' } });
  cleanup(() => sluice.close());
  return { sluice, relay, dir, key: await sluice.createKey(`prestop-${drainSeconds}`) };
}

const { hook: HOOK } = manifestHook();
/** From the hook's start until sluice must have begun draining: its wait for the endpoint removal, and slack for a loaded machine. */
const DRAIN_STARTS_WITHIN_MS = (HOOK.endpointWaitSeconds + 3) * 1000;

describe.concurrent("the relay's preStop hook drains sluice while the relay still serves", () => {
  it('a 20 s stream in flight: the hook returns only after the stream ended, and the stream arrived whole; no request can start a drain', async ({ expect, onTestFinished }) => {
    const s = await setUp(30, 18, (fn) => onTestFinished(fn));
    const stream = openStream(s.sluice.url, s.key);
    await stream.started;

    // Nothing that comes over the network starts a drain: there is no such endpoint, on either
    // listener, with or without the admin token; only the file in the Pod's own volume does.
    const auth = { authorization: `Bearer ${CHILD_ADMIN_TOKEN}` };
    for (const path of ['/drain', '/admin/drain', '/drainz', '/shutdown', '/admin/shutdown', `/${DRAIN_REQUEST_FILE}`]) {
      for (const method of ['GET', 'POST', 'PUT']) {
        const r = await fetch(`${s.sluice.adminUrl}${path}`, { method, headers: auth });
        await r.arrayBuffer();
        expect(r.status, `${method} ${path} on the admin port`).toBe(404);
      }
    }
    expect((await fetch(`${s.sluice.adminUrl}/readyz`)).status).toBe(200);

    const hookStart = Date.now();
    const hook = runHook(s.dir);
    onTestFinished(() => hook.kill());
    const drainAt = await notReadyWithin(s.sluice.adminUrl, DRAIN_STARTS_WITHIN_MS);
    // The hook waits for the endpoint removal before it asks.
    expect(drainAt - hookStart).toBeGreaterThanOrEqual(HOOK.endpointWaitSeconds * 1000 - 100);
    // Draining: no new connections, as on SIGTERM.
    expect(await connectionRefused(s.sluice.url)).toBe('ECONNREFUSED');

    const [ended, hooked] = await Promise.all([stream.ended, hook.exited]);
    expect(ended).toEqual({ complete: true, text: STANDIN_TEXT, events: 18 + 3, done: true, at: ended.at });
    expect(hooked.code).toBe(0);
    // The hook (and so the relay) waited for the stream: it returned after the stream ended, soon after.
    expect(hooked.at).toBeGreaterThanOrEqual(ended.at);
    expect(hooked.at - ended.at).toBeLessThan(SHUTDOWN_BUDGET.hookSlackSeconds * 1000);
    expect(JSON.parse(readFileSync(join(s.dir, DRAIN_DONE_FILE), 'utf8'))).toEqual({ forced: 0 });
    expect(s.relay.requests.map((r) => r.closedEarly)).toEqual([false]);
    // The access line may still be held (up to 50 ms) or in the pipe when the hook returns.
    const line = await eventually(() => s.sluice.lines().find((l) => l.msg === 'request' && l.path === '/v1/chat/completions') ?? false, {
      timeoutMs: 1_000,
      what: 'the access line',
    });
    expect(line.decision).toBe('admitted');

    // The hook took its request back as it returned: sluice, drained, exits by itself (0), as
    // soon as it sees that, before Kubernetes stops the relay and sends the sidecar SIGTERM.
    expect(existsSync(join(s.dir, DRAIN_REQUEST_FILE))).toBe(false);
    expect(await s.sluice.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - hooked.at).toBeLessThan(SHUTDOWN_BUDGET.sluiceExitSeconds * 1000);
  }, 45_000);

  it('a relay restarted in the Pod (kubelet runs the hook for a failed liveness probe too) finds a fresh sluice serving: the drain does not outlive the hook', async ({
    expect,
    onTestFinished,
  }) => {
    const s = await setUp(30, 1, (fn) => onTestFinished(fn));
    const hook = runHook(s.dir);
    onTestFinished(() => hook.kill());
    await notReadyWithin(s.sluice.adminUrl, DRAIN_STARTS_WITHIN_MS);
    expect((await hook.exited).code).toBe(0);
    // Drained, with the hook gone: the old sluice exits, and kubelet starts the sidecar again on the same volume.
    expect(await s.sluice.exited).toEqual({ code: 0, signal: null });
    const fresh = await startChildSluice({ relayUrl: s.relay.url, env: { SLUICE_DRAIN_DIR: s.dir } });
    onTestFinished(() => fresh.close());
    const ready = await fetch(`${fresh.adminUrl}/readyz`);
    await ready.arrayBuffer();
    expect(ready.status).toBe(200);
    const key = await fresh.createKey('after-restart');
    const r = await fetch(`${fresh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"model":"gpt-4o"}',
    });
    await r.arrayBuffer();
    expect(r.status).toBe(200);
    expect(fresh.lines().some((l) => String(l.msg).startsWith('drain requested'))).toBe(false);
  }, 45_000);

  it('a stream longer than drainSeconds is cut at the bound by sluice, logged and counted as drain_deadline, and only then does the hook return', async ({
    expect,
    onTestFinished,
  }) => {
    const BOUND_S = 3;
    const s = await setUp(BOUND_S, 60, (fn) => onTestFinished(fn));
    const stream = openStream(s.sluice.url, s.key);
    await stream.started;
    const hook = runHook(s.dir);
    onTestFinished(() => hook.kill());
    const drainAt = await notReadyWithin(s.sluice.adminUrl, DRAIN_STARTS_WITHIN_MS);

    const ended = await stream.ended;
    expect(ended.complete).toBe(false);
    expect(ended.done).toBe(false);
    // Cut at the bound (readiness is polled every 50 ms; the deadline timer fires on time, give or take a loaded machine).
    expect(ended.at - drainAt).toBeGreaterThanOrEqual(BOUND_S * 1000 - 100);
    expect(ended.at - drainAt).toBeLessThan(BOUND_S * 1000 + 2000);
    // Read while sluice still runs: it exits once the hook has returned.
    const text = await eventually(
      async () => {
        const t = await metricsText(s.sluice);
        return metricValue(t, 'sluice_requests_total', { family: 'chat', outcome: 'drain_deadline' }) === 1 && t;
      },
      { timeoutMs: 1_000, intervalMs: 20, what: 'the cut request counted' },
    );
    expect(metricValue(text, 'sluice_requests_total', { family: 'chat', outcome: 'client_aborted' })).toBe(0);
    const hooked = await hook.exited;
    expect(hooked.code).toBe(0);
    expect(hooked.at).toBeGreaterThanOrEqual(ended.at);
    expect(JSON.parse(readFileSync(join(s.dir, DRAIN_DONE_FILE), 'utf8'))).toEqual({ forced: 1 });
    // The relay's request was aborted by sluice's cut, while the relay still ran.
    expect(s.relay.requests.map((r) => r.closedEarly)).toEqual([true]);

    const line = await eventually(() => s.sluice.lines().find((l) => l.msg === 'request' && l.path === '/v1/chat/completions') ?? false, {
      timeoutMs: 1_000,
      what: 'the access line',
    });
    expect(line.decision).toBe('drain_deadline');
    expect(s.sluice.lines().find((l) => l.msg?.toString().startsWith('drain deadline passed'))).toMatchObject({ forced: 1, drainSeconds: BOUND_S });

    expect(await s.sluice.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - hooked.at).toBeLessThan(SHUTDOWN_BUDGET.sluiceExitSeconds * 1000);
  }, 45_000);
});
