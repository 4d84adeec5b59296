/**
 * The manifests cannot drift from the program: take the built Deployment, start sluice with exactly
 * the sidecar's command, environment and mounted config file, and call it where the manifests say
 * it listens (probe paths on the probe ports, the Service's target port, the relay at the upstream
 * URL). Then SIGTERM it and expect exit code 0 within the Pod's grace period.
 *
 * What differs from the cluster, and only this:
 *   - `node dist/<x>.js` runs as `node --import tsx src/<x>.ts` (the same node, the sources instead of
 *     the compiled output; signals and the exit code are the program's own) with the repository as
 *     the working directory (the image's WORKDIR);
 *   - values that come from Secrets (not in the manifests) are test values; the Redis URL is the test
 *     run's Redis;
 *   - SLUICE_CONFIG points at a temporary directory holding the ConfigMap's files, as the mount would;
 *   - the relay at SLUICE_UPSTREAM_URL is the relay stand-in, started on that very address.
 * Ports come from the manifests: if one is taken on this machine the test says so and fails.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { effectiveArgv, last, readDockerfile, stageEnv } from './dockerfile.js';
import {
  configMount,
  containerPort,
  existsInRepo,
  expandK8s,
  httpProbe,
  kubectlMode,
  kustomize,
  one,
  publicService,
  ROOT,
  SHUTDOWN_BUDGET,
  shutdownHook,
  sluicePod,
  type K8sObject,
  type ShutdownHook,
} from './k8s.js';
import { DRAIN_DONE_FILE, DRAIN_REQUEST_FILE } from '../../src/runtime/drain-hook.js';
import { eventually, GiveUp } from '../support/time.js';

const STARTUP_TIMEOUT_MS = 20_000;

/** Stand-ins for what the operator's Secrets hold, by the variable they feed. */
function secretTestValues(): Record<string, string> {
  return {
    SLUICE_ADMIN_TOKEN: 'drift-test-admin-token-0123456789',
    SLUICE_REDIS_URL: inject('redisUrl'),
    SLUICE_UPSTREAM_CREDENTIAL: 'sk-drifttestupstreamcredential',
    // The relay's SQL_DSN: a relay database of this test's own, with the relay's tables.
    SLUICE_RELAY_DB: relayDb.dsn,
  };
}

let relayDb: RelayDbFixture;
beforeAll(async () => {
  relayDb = await createRelayDb('postgres');
});
afterAll(() => relayDb?.drop());

/** `node dist/x.js ...` → `node --import tsx src/x.ts ...`; anything else is refused. */
function toDev(argv: string[]): { args: string[]; entry: string } {
  const [bin, ...rest] = argv;
  if (bin !== 'node') throw new Error(`the container runs ${JSON.stringify(argv)}, not node`);
  const at = rest.findIndex((a) => !a.startsWith('-'));
  const m = /^(?:\.\/)?dist\/(.+)\.js$/.exec(rest[at] ?? '');
  if (!m) throw new Error(`the container runs ${JSON.stringify(rest[at])}, not a dist/*.js file`);
  const entry = `src/${m[1]}.ts`;
  return { args: [...rest.slice(0, at), '--import', 'tsx', entry, ...rest.slice(at + 1)], entry };
}

/**
 * The container's environment as Kubernetes would set it, Secret values replaced by test values
 * (`secrets` overrides them; null: the Secret lacks that key, and an optional one is then left unset).
 */
function containerEnv(objects: K8sObject[], c: IContainer, secrets: Record<string, string | null> = {}): { env: Record<string, string>; fromSecrets: string[] } {
  const tests: Record<string, string | null> = { ...secretTestValues(), ...secrets };
  const env: Record<string, string> = {};
  const fromSecrets: string[] = [];
  // $(VAR) refers to variables defined earlier in the list; $$ is a literal $.
  const expand = (v: string): string => expandK8s(v, env);
  if (c.envFrom?.length) throw new Error(`container ${c.name}: envFrom is not supported by this test; use env`);
  for (const e of c.env ?? []) {
    if (e.value !== undefined) {
      env[e.name] = expand(e.value);
    } else if (e.valueFrom?.secretKeyRef) {
      const v = tests[e.name];
      if (v === undefined) throw new Error(`${e.name} comes from a Secret: give it a test value in secretTestValues()`);
      if (v === null) {
        if (!e.valueFrom.secretKeyRef.optional) throw new Error(`${e.name}: the Secret lacks key ${e.valueFrom.secretKeyRef.key}, which is not optional: the Pod would not start`);
        continue;
      }
      env[e.name] = v;
      fromSecrets.push(e.name);
    } else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const v = one<IConfigMap>(objects, 'ConfigMap', ref.name!).data?.[ref.key];
      if (v === undefined) throw new Error(`${e.name}: ConfigMap ${ref.name} has no key ${ref.key}`);
      env[e.name] = v;
    } else if (e.valueFrom) {
      throw new Error(`${e.name}: unsupported valueFrom ${JSON.stringify(e.valueFrom)}`);
    } else {
      env[e.name] = '';
    }
  }
  return { env, fromSecrets };
}

function assertPortFree(port: number, host: string, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `${what} port ${port} (from the manifests) is not free on this machine (${err.code ?? err.message}). ` +
            'The drift test runs sluice on the ports the manifests name; stop whatever holds it and re-run.',
        ),
      ),
    );
    s.listen(port, host, () => s.close(() => resolve()));
  });
}

interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(args: string[], env: Record<string, string>): Running {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (b: Buffer): void => {
    out = (out + b.toString('utf8')).slice(-8_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => out, exited };
}

async function waitFor200(url: string, run: Running, timeoutMs: number): Promise<void> {
  let exited = false;
  void run.exited.then(() => (exited = true));
  await eventually(
    async () => {
      if (exited) throw new GiveUp(`sluice exited before ${url} answered 200. Its output:\n${run.output()}`);
      let last: string;
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
        await res.arrayBuffer();
        if (res.status === 200) return;
        last = `HTTP ${res.status}`;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      throw new Error(`last: ${last}. sluice output:\n${run.output()}`);
    },
    { timeoutMs, intervalMs: 200, what: `${url} to answer 200` },
  );
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

interface Launched {
  objects: K8sObject[];
  env: Record<string, string>;
  run: Running;
  relay: RelayStandin;
  /** URL of a path on a port of the local sluice. */
  at: (port: number, path: string) => string;
  adminPort: number;
  servicePort: number;
  annotations: Record<string, string>;
  graceSeconds: number;
  /** The relay's preStop hook and the volume it shares with sluice (here a temporary directory). */
  hook: ShutdownHook;
  drainDir: string;
  /** The relay container's literal variables, for Kubernetes' $(VAR) expansion of its hook. */
  relayEnv: Record<string, string>;
}

/**
 * Builds `dir`, starts sluice exactly as its sidecar container says (see the file comment for the
 * only differences) with the relay stand-in at SLUICE_UPSTREAM_URL, and waits until the startup,
 * liveness and readiness probes answer 200 on the ports they name.
 */
interface LaunchOptions {
  /** What the Secrets hold, over secretTestValues() (null: the key is absent). */
  secrets?: Record<string, string | null>;
  /** The variables that come from Secrets (default: those of the base). */
  fromSecrets?: string[];
  /** A relay's SQLite file standing for the one the manifests mount read-only (SLUICE_RELAY_DB=sqlite:...). */
  relayDbFile?: string;
  /** The relay stand-in checks tokens as new-api does (demo/relay.ts, `tokens`). */
  tokens?: (token: string) => boolean | Promise<boolean>;
}

async function launchFromManifests(dir: string, o: LaunchOptions = {}): Promise<Launched> {
  const objects = kustomize(dir);
  const { deployment, pod, sidecar, relay: relayContainer } = sluicePod(objects);

  // Command: what the container runs (manifest command/args over the image's ENTRYPOINT/CMD).
  const runtime = readDockerfile().at(-1)!;
  const argv = effectiveArgv(runtime, sidecar.command, sidecar.args);
  // The Node flags production runs with (src/runtime/node-flags.ts), then the compiled entry.
  expect(argv).toEqual(['node', ...NODE_FLAGS, 'dist/main.js']);
  // The image alone would run the same.
  expect(effectiveArgv(runtime, undefined, undefined)).toEqual(argv);
  expect(sidecar.workingDir ?? last(runtime, 'WORKDIR')?.args).toBe('/app');
  const { args: devArgs, entry } = toDev(argv);
  // The mapping puts the loader before the entry and swaps dist/<x>.js for src/<x>.ts, nothing else.
  expect(devArgs).toEqual([...NODE_FLAGS, '--import', 'tsx', 'src/main.ts']);
  expect(existsInRepo(entry)).toBe(true);

  // Environment: the image's ENV, then the container's env.
  const { env: manifestEnv, fromSecrets } = containerEnv(objects, sidecar, o.secrets);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: process.env.HOME ?? tmpdir(),
    ...stageEnv(runtime),
    ...manifestEnv,
  };
  expect(fromSecrets.sort()).toEqual(o.fromSecrets ?? ['SLUICE_ADMIN_TOKEN', 'SLUICE_REDIS_URL', 'SLUICE_RELAY_DB', 'SLUICE_UPSTREAM_CREDENTIAL']);

  // The config file: the ConfigMap's files in a directory, as the volume mount lays them out.
  const { mount, files, fileName } = configMount(objects, pod, sidecar);
  const dirOnDisk = mkdtempSync(join(tmpdir(), 'sluice-drift-'));
  cleanups.push(() => rmSync(dirOnDisk, { recursive: true, force: true }));
  for (const [name, text] of files) writeFileSync(join(dirOnDisk, name), text);
  expect(env.SLUICE_CONFIG).toBe(`${mount.mountPath.replace(/\/$/, '')}/${fileName}`);
  env.SLUICE_CONFIG = join(dirOnDisk, fileName);
  // The volume the relay's preStop hook shares with sluice: an empty directory, as the emptyDir is.
  const hook = shutdownHook(pod, sidecar, relayContainer, DRAIN_REQUEST_FILE, DRAIN_DONE_FILE);
  const drainDir = mkdtempSync(join(tmpdir(), 'sluice-drift-drain-'));
  cleanups.push(() => rmSync(drainDir, { recursive: true, force: true }));
  expect(env.SLUICE_DRAIN_DIR).toBe(hook.sluicePath);
  env.SLUICE_DRAIN_DIR = drainDir;
  // The relay's SQLite file, where the read-only mount of its data volume puts it.
  const relayDb = env.SLUICE_RELAY_DB;
  if (relayDb?.startsWith('sqlite:') && fromSecrets.indexOf('SLUICE_RELAY_DB') === -1) {
    if (o.relayDbFile === undefined) throw new Error(`${dir} reads the relay's SQLite file: pass relayDbFile`);
    const path = relayDb.slice('sqlite:'.length);
    const mount = (sidecar.volumeMounts ?? []).find((m) => path.startsWith(`${m.mountPath}/`));
    expect(mount?.readOnly).toBe(true);
    expect(basename(path)).toBe(basename(o.relayDbFile));
    env.SLUICE_RELAY_DB = `sqlite:${join(dirname(o.relayDbFile), path.slice(mount!.mountPath.length + 1))}`;
  }
  const changed = Object.keys(manifestEnv).filter((k) => env[k] !== manifestEnv[k]);
  expect(changed.sort()).toEqual(o.relayDbFile ? ['SLUICE_CONFIG', 'SLUICE_DRAIN_DIR', 'SLUICE_RELAY_DB'] : ['SLUICE_CONFIG', 'SLUICE_DRAIN_DIR']);

  // Ports, all from the manifests.
  const publicPort = containerPort(sidecar, 'http');
  const liveness = httpProbe(sidecar, sidecar.livenessProbe, 'livenessProbe');
  const readiness = httpProbe(sidecar, sidecar.readinessProbe, 'readinessProbe');
  const startup = sidecar.startupProbe ? httpProbe(sidecar, sidecar.startupProbe, 'startupProbe') : null;
  const servicePort = publicService(objects).targetPort;
  const upstream = new URL(env.SLUICE_UPSTREAM_URL!);
  const host = env.SLUICE_HOST ?? '0.0.0.0';
  const adminHost = env.SLUICE_ADMIN_HOST ?? '0.0.0.0';
  await assertPortFree(publicPort, host, 'sluice public');
  await assertPortFree(liveness.port, adminHost, 'sluice admin');
  if (readiness.port !== liveness.port) await assertPortFree(readiness.port, adminHost, 'sluice readiness');

  // The relay, where SLUICE_UPSTREAM_URL says it is.
  let relay: RelayStandin;
  try {
    relay = await startRelayStandin({ host: upstream.hostname, port: Number(upstream.port), quiet: true, tokens: o.tokens });
  } catch (err) {
    throw new Error(
      `cannot start the relay stand-in at ${upstream.host} (SLUICE_UPSTREAM_URL from the manifests): ` +
        `${err instanceof Error ? err.message : String(err)}. Free that port and re-run.`,
    );
  }
  cleanups.push(() => relay.close());

  const run = start(devArgs, env);
  cleanups.push(() => {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  });

  const at = (port: number, path: string): string => `http://127.0.0.1:${port}${path}`;
  if (startup) await waitFor200(at(startup.port, startup.path), run, STARTUP_TIMEOUT_MS);
  await waitFor200(at(liveness.port, liveness.path), run, STARTUP_TIMEOUT_MS);
  await waitFor200(at(readiness.port, readiness.path), run, STARTUP_TIMEOUT_MS);

  return {
    objects,
    env,
    run,
    relay,
    at,
    adminPort: containerPort(sidecar, 'admin'),
    servicePort,
    annotations: deployment.spec?.template.metadata?.annotations ?? {},
    graceSeconds: pod.terminationGracePeriodSeconds ?? 30,
    hook,
    drainDir,
    relayEnv: Object.fromEntries((relayContainer.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]]))),
  };
}

/** SIGTERM, then the exit status, or 'timeout' after the Pod's grace period. */
async function terminate(l: Launched): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'timeout'> {
  l.run.child.kill('SIGTERM');
  return Promise.race([l.run.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), l.graceSeconds * 1000).unref())]);
}

/**
 * The Pod's shutdown as Kubernetes runs it: the relay's preStop hook (its command, run by /bin/sh
 * as kubelet runs it in the relay container, with the shared volume's mount path standing for the
 * temporary directory), then, once it returned, SIGTERM to sluice. Resolves with how long the hook
 * took and sluice's exit status, or 'timeout' past the grace period.
 */
async function podShutdown(l: Launched): Promise<{ hookMs: number; hookCode: number | null; exit: Awaited<ReturnType<typeof terminate>> }> {
  const [bin, ...args] = l.hook.command.map((a) => expandK8s(a, l.relayEnv).split(l.hook.relayPath.replace(/\/$/, '')).join(l.drainDir));
  const t0 = Date.now();
  const hook = spawn(bin!, args, { stdio: 'ignore' });
  const hookCode = await Promise.race([
    new Promise<number | null>((r) => hook.once('exit', (code) => r(code))),
    new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), l.graceSeconds * 1000).unref()),
  ]);
  if (hookCode === 'timeout') {
    hook.kill('SIGKILL');
    return { hookMs: Date.now() - t0, hookCode: null, exit: 'timeout' };
  }
  const hookMs = Date.now() - t0;
  return { hookMs, hookCode, exit: await terminate(l) };
}

const TITLE = kubectlMode === 'skip' ? 'drift (SKIPPED: kubectl is not on PATH and CI is not set)' : 'drift: manifests vs. program';

describe.skipIf(kubectlMode === 'skip')(TITLE, () => {
  it.each(['deploy/base', 'deploy/overlays/dev-redis'])(
    "%s: sluice starts with the manifest's command, env and config file, answers its probes and the Service port, drains in the relay's preStop hook and stops with 0",
    async (dir) => {
      const l = await launchFromManifests(dir);

      // The admin token from the Secret opens the admin API on the admin port.
      const admin = (path: string, init: RequestInit = {}): Promise<Response> =>
        fetch(l.at(l.adminPort, path), {
          ...init,
          headers: { authorization: `Bearer ${l.env.SLUICE_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        });
      const created = await admin('/admin/keys', {
        method: 'POST',
        body: JSON.stringify({ user: `drift-${process.pid}-${Date.now()}`, name: 'drift test' }),
      });
      const createdBody = (await created.json()) as { id: string; key: string };
      expect(created.status, JSON.stringify(createdBody)).toBe(201);
      cleanups.push(async () => {
        // On failure paths (sluice still runs): do not leave the key in the shared Redis.
        await admin(`/admin/keys/${encodeURIComponent(createdBody.id)}`, { method: 'DELETE' }).then(
          (r) => r.arrayBuffer(),
          () => undefined,
        );
      });

      // The Service's target port is sluice's public listener, which forwards to the relay with the
      // relay credential from the Secret.
      const res = await fetch(l.at(l.servicePort, '/v1/models'), { headers: { authorization: `Bearer ${createdBody.key}` } });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      expect(l.relay.requests).toHaveLength(1);
      expect(l.relay.requests[0]!.headers.authorization).toBe(`Bearer ${l.env.SLUICE_UPSTREAM_CREDENTIAL}`);
      // A key made in the relay's console works too: sluice reads the relay's database from the
      // Secret key the manifests wire (SQL_DSN).
      const token = await relayDb.addToken(await relayDb.addUser());
      const fromConsole = await fetch(l.at(l.servicePort, '/v1/models'), { headers: { authorization: `Bearer sk-${token.key}` } });
      await fromConsole.arrayBuffer();
      expect(fromConsole.status).toBe(200);
      // It is the relay's own token: it reaches the relay as sent, never as the credential.
      expect(l.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer sk-${token.key}`);
      const deleted = await admin(`/admin/keys/${encodeURIComponent(createdBody.id)}`, { method: 'DELETE' });
      await deleted.arrayBuffer();
      expect(deleted.status).toBe(204);

      // The Pod's shutdown: the relay's preStop hook returns once sluice has drained (nothing is in
      // flight: at once after its wait for the endpoint removal), and sluice then exits 0 on SIGTERM.
      const down = await podShutdown(l);
      expect(down.hookCode, `sluice output:\n${l.run.output()}`).toBe(0);
      expect(existsSync(join(l.drainDir, DRAIN_DONE_FILE)), 'sluice answered the hook').toBe(true);
      expect(down.hookMs).toBeLessThan((l.hook.endpointWaitSeconds + SHUTDOWN_BUDGET.hookSlackSeconds) * 1000);
      expect(down.exit, `sluice output:\n${l.run.output()}`).toEqual({ code: 0, signal: null });
    },
    120_000,
  );

  it("deploy/overlays/try (docs/kubernetes.md, Try it out): a token from the relay's console gets 200 through sluice, as sent; a registry key gets 200 once upstream-credential holds a relay token", async () => {
    // The relay's SQLite file (new-api's tables), and a relay that, like new-api, accepts only its tokens.
    const fx = await createRelayDb('sqlite');
    cleanups.push(() => fx.drop());
    const relayDbFile = fx.dsn.slice('sqlite:'.length);
    const tokens = async (token: string): Promise<boolean> => (await fx.exec('SELECT 1 FROM tokens WHERE "key" = ? AND deleted_at IS NULL', [token])).length === 1;
    const call = async (l: Launched, key: string): Promise<{ status: number; body: string }> => {
      const res = await fetch(l.at(l.servicePort, '/v1/models'), { headers: { authorization: `Bearer ${key}` } });
      return { status: res.status, body: await res.text() };
    };

    // Step 2: the Secret holds only the admin token.
    const trySecrets = { SLUICE_UPSTREAM_CREDENTIAL: null };
    const fromSecrets = ['SLUICE_ADMIN_TOKEN', 'SLUICE_REDIS_URL'];
    let l = await launchFromManifests('deploy/overlays/try', { secrets: trySecrets, fromSecrets, relayDbFile, tokens });
    expect(l.env.SLUICE_UPSTREAM_CREDENTIAL).toBeUndefined();
    // Step 3: a token made in the console.
    const token = await fx.addToken(await fx.addUser());
    const key = `sk-${token.key}`;
    // Step 4: 200 through sluice, the token as sent; a wrong key is sluice's 401, unseen by the relay.
    expect(await call(l, key)).toMatchObject({ status: 200 });
    expect(l.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${key}`);
    const seen = l.relay.started;
    const wrong = await call(l, 'sk-wrong');
    expect(wrong.status).toBe(401);
    expect(l.relay.started).toBe(seen);
    // A key from sluice's registry, without the credential: the relay never issued it (its 401).
    const admin = (path: string, init: RequestInit = {}): Promise<Response> =>
      fetch(l.at(l.adminPort, path), { ...init, headers: { authorization: `Bearer ${l.env.SLUICE_ADMIN_TOKEN}`, 'content-type': 'application/json' } });
    const created = await admin('/admin/keys', { method: 'POST', body: JSON.stringify({ user: `try-${process.pid}-${Date.now()}`, name: 'laptop' }) });
    const registry = (await created.json()) as { id: string; key: string };
    expect(created.status).toBe(201);
    cleanups.push(async () => {
      await admin(`/admin/keys/${encodeURIComponent(registry.id)}`, { method: 'DELETE' }).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      );
    });
    const refused = await call(l, registry.key);
    expect(refused.status).toBe(401);
    expect(l.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${registry.key}`);
    expect(await terminate(l), `sluice output:\n${l.run.output()}`).toEqual({ code: 0, signal: null });
    await l.relay.close();

    // The credential step: the Secret gains upstream-credential (the console token), the Pod restarts.
    l = await launchFromManifests('deploy/overlays/try', {
      secrets: { SLUICE_UPSTREAM_CREDENTIAL: key },
      fromSecrets: [...fromSecrets, 'SLUICE_UPSTREAM_CREDENTIAL'],
      relayDbFile,
      tokens,
    });
    expect(await call(l, registry.key)).toMatchObject({ status: 200 });
    expect(l.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${key}`);
    // The console token still passes as sent.
    const other = await fx.addToken(await fx.addUser());
    expect(await call(l, other.key)).toMatchObject({ status: 200 });
    expect(l.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${other.key}`);
    const deleted = await fetch(l.at(l.adminPort, `/admin/keys/${encodeURIComponent(registry.id)}`), {
      method: 'DELETE',
      headers: { authorization: `Bearer ${l.env.SLUICE_ADMIN_TOKEN}` },
    });
    await deleted.arrayBuffer();
    expect(deleted.status).toBe(204);
    expect(await terminate(l), `sluice output:\n${l.run.output()}`).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('deploy/base: Prometheus finds metrics where the Pod annotations say', async () => {
    const l = await launchFromManifests('deploy/base');
    expect(l.annotations['prometheus.io/scrape']).toBe('true');
    const path = l.annotations['prometheus.io/path'] ?? '/metrics';
    const res = await fetch(l.at(Number(l.annotations['prometheus.io/port'] ?? 0), path));
    const text = await res.text();
    expect(res.status, `GET ${path} on port ${l.annotations['prometheus.io/port']}`).toBe(200);
    expect(text).toMatch(/^# (HELP|TYPE) /m);
    expect(await terminate(l), `sluice output:\n${l.run.output()}`).toEqual({ code: 0, signal: null });
  }, 120_000);
});
