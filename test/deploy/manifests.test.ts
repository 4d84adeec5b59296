/**
 * deploy/: every kustomization builds offline, every object validates against the Kubernetes
 * schemas, and the Pod has the shape the issue asks for (native sidecar, probes on the admin port,
 * hardening, drain budget, hot-reloadable config, Service and NetworkPolicy exposing only what they
 * should). The program side of the contract is checked in drift.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IIngress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import { buildConfig, DEFAULTS, ENV_VARS } from '../../src/config/index.js';
import {
  APPLIED,
  BUILT,
  buildIn,
  byKind,
  COMPONENTS,
  configMount,
  containerPort,
  envVar,
  findKustomizations,
  httpProbe,
  kubectlMode,
  kustomize,
  KUSTOMIZATIONS,
  NAMES,
  labelsMatch,
  one,
  parseManifests,
  podServices,
  publicService,
  READER_OVERLAYS,
  READER_VALUES,
  readerBlocks,
  readerCopy,
  resolvePort,
  ROOT,
  SHUTDOWN_BUDGET,
  shutdownHook,
  sluicePod,
  validateObject,
  type K8sObject,
} from './k8s.js';
import { DRAIN_DONE_FILE, DRAIN_REQUEST_FILE } from '../../src/runtime/drain-hook.js';

/** Measured memory (MB RSS): idle and at 5,000 concurrent streams. */
const MEASURED_IDLE_MB = 80;
const MEASURED_PEAK_MB = 150;

/** Bytes of a memory quantity, cores of a CPU quantity. */
function quantity(q: string | number | undefined, what: string): number {
  if (q === undefined) throw new Error(`${what} is not set`);
  if (typeof q === 'number') return q;
  const m = /^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  if (!m) throw new Error(`${what}: cannot read quantity ${q}`);
  const factor: Record<string, number> = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? factor[m[2]]! : 1);
}

function readSecretExample(): ISecret {
  const docs = parseManifests(readFileSync(join(ROOT, 'deploy/base/secret.example.yaml'), 'utf8'), 'secret.example.yaml');
  expect(docs).toHaveLength(1);
  return docs[0] as unknown as ISecret;
}

function decodeSecret(secret: ISecret, key: string): string | undefined {
  if (secret.stringData?.[key] !== undefined) return secret.stringData[key];
  const b64 = secret.data?.[key];
  return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
}

function drainSecondsOf(files: Map<string, string>, fileName: string): number {
  const text = files.get(fileName);
  if (text === undefined) throw new Error(`the config ConfigMap has no ${fileName}`);
  const doc = (parseYaml(text) ?? {}) as Record<string, unknown>;
  const v = doc.drainSeconds;
  if (v === undefined) return DEFAULTS.drainSeconds;
  if (typeof v !== 'number') throw new Error(`drainSeconds in ${fileName} is not a number`);
  return v;
}

/** Whether the relay container takes its environment from this Secret. */
function relayReadsSecret(relay: IContainer, name: string): boolean {
  return (relay.envFrom ?? []).some((f) => f.secretRef?.name === name) || (relay.env ?? []).some((e) => e.valueFrom?.secretKeyRef?.name === name);
}

/** Every string in an object, with where it is (`Kind/name.a.b[0]`). */
function* stringsOf(value: unknown, path: string): Generator<[string, string]> {
  if (typeof value === 'string') yield [path, value];
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) yield* stringsOf(v, `${path}[${i}]`);
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) yield* stringsOf(v, `${path}.${k}`);
}

/** Names reserved for examples and private use (RFC 2606, RFC 6761, the .internal TLD): nobody's real address. */
const PLACEHOLDER_NAME = /(^|\.)example(\.|$)|\.(invalid|internal|test|local|localhost|example)$/i;
const HOST = /\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}\b/gi;
const IPV4 = /\b\d{1,3}(?:\.\d{1,3}){3}(?:\/\d{1,2})?\b/g;

/**
 * Hosts and addresses in a string that the reader did not write: a name reserved for examples, or
 * an IP address (or CIDR) that is neither loopback (the relay inside the Pod) nor the reader's own.
 */
function placeholderAddresses(text: string): string[] {
  const out: string[] = [];
  for (const host of text.match(HOST) ?? []) if (PLACEHOLDER_NAME.test(host)) out.push(host);
  const readers = new Set(Object.values(READER_VALUES));
  for (const ip of text.match(IPV4) ?? []) if (!ip.startsWith('127.') && !readers.has(ip)) out.push(ip);
  return out;
}

describe('deploy/ kustomizations', () => {
  it('recognises the stand-in addresses the deploy examples once held', () => {
    expect(placeholderAddresses('redis-sentinel-0.example.internal:26379,redis-sentinel-1.example.internal:26379')).toHaveLength(2);
    expect(placeholderAddresses('trustedProxies:\n  - 10.244.0.0/16   # placeholder')).toEqual(['10.244.0.0/16']);
    expect(placeholderAddresses('api.example.com')).toEqual(['api.example.com']);
    expect(placeholderAddresses('rediss://:p@redis.example.internal:6380/0')).toEqual(['redis.example.internal']);
    // Not addresses, or the reader's own, or loopback.
    expect(placeholderAddresses(`http://127.0.0.1:3000 docs/kubernetes.md ${READER_VALUES.FOREIGN_HOST} ${READER_VALUES.INGRESS_POD_CIDR} redis://sluice-redis:6379`)).toEqual([]);
  });

  it('the tests cover every kustomization and every Component under deploy/, and every overlay docs/kubernetes.md has the reader write', () => {
    expect(findKustomizations()).toEqual([...KUSTOMIZATIONS].sort());
    expect(findKustomizations('Component')).toEqual([...COMPONENTS].sort());
    const written = new Set(readerBlocks().flatMap((b) => [...b.matchAll(/cat > (deploy\/overlays\/[\w-]+)\/kustomization\.yaml/g)].map((m) => m[1]!)));
    expect([...written].sort()).toEqual([...READER_OVERLAYS].sort());
  });

  it("docs/kubernetes.md's blocks that write the reader's files stop, naming the value, until the reader set it", () => {
    const blocks = readerBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    const dir = mkdtempSync(join(tmpdir(), 'sluice-unset-'));
    try {
      cpSync(join(ROOT, 'deploy'), join(dir, 'deploy'), { recursive: true });
      for (const block of blocks) {
        const needs = [...block.matchAll(/\$\{([A-Z_]+):\?/g)].map((m) => m[1]!);
        // Every value a block asks for has a stand-in in the tests.
        for (const n of needs) expect(READER_VALUES, n).toHaveProperty(n);
        if (needs.length === 0) continue;
        const r = spawnSync('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', block], {
          cwd: dir,
          stdio: ['ignore', 'pipe', 'pipe'],
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
        });
        expect(r.status, block).not.toBe(0);
        expect(r.stderr).toContain(needs[0]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('secret.example.yaml (not applied: the operator creates the Secret) is a valid Secret', () => {
    const secret = readSecretExample();
    expect(validateObject(secret as unknown as K8sObject)).toEqual([]);
    expect(secret.metadata?.name).toBe(NAMES.secret);
    const token = decodeSecret(secret, 'admin-token') ?? '';
    expect(token.length).toBeGreaterThanOrEqual(16);
  });
});

const RELEASE = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

const BUILD_TITLE = kubectlMode === 'skip' ? 'kubectl kustomize (SKIPPED: kubectl is not on PATH and CI is not set)' : 'kubectl kustomize';

describe.skipIf(kubectlMode === 'skip')(BUILD_TITLE, () => {
  describe.each(BUILT)('%s', (dir) => {
    it('builds with `kubectl kustomize` and every object validates against the Kubernetes schemas', () => {
      const objects = kustomize(dir);
      expect(objects.length).toBeGreaterThan(0);
      const ids = objects.map((o) => `${o.kind}/${o.metadata.name}`);
      expect(new Set(ids).size, 'duplicate objects').toBe(ids.length);
      const problems = objects.flatMap(validateObject);
      expect(problems).toEqual([]);
    });

    it('points at no host or address the reader did not write (images aside: documented stand-ins)', () => {
      const found: string[] = [];
      for (const o of kustomize(dir)) {
        for (const [path, value] of stringsOf(o, `${o.kind}/${o.metadata.name}`)) {
          if (/\.image$/.test(path)) continue;
          for (const problem of placeholderAddresses(value)) found.push(`${path}: ${problem}`);
        }
      }
      expect(found).toEqual([]);
    });

    it('runs sluice as a native sidecar of the relay, hardened, probed on its admin port', () => {
      const { pod, sidecar, relay } = sluicePod(kustomize(dir));
      // A restartable init container: starts before the relay, stops after it (Kubernetes >= 1.29).
      expect(sidecar.restartPolicy).toBe('Always');
      expect(pod.containers.map((c) => c.name)).not.toContain(NAMES.sidecar);
      // A pinned sluice image: a version tag or a digest, never latest.
      expect(sidecar.image).toMatch(/\/sluice(?::[\w.-]+)?(?:@sha256:[0-9a-f]{64})?$/);
      expect(sidecar.image).toMatch(/:(?!latest$)[\w.-]+$|@sha256:[0-9a-f]{64}$/);
      // ... of this release: the tag is package.json's version, which the image reports (sluice --version).
      expect(sidecar.image!.split(':').at(-1)).toBe(RELEASE);

      const sc = sidecar.securityContext;
      expect(sc?.runAsNonRoot).toBe(true);
      expect(sc?.runAsUser).toBeGreaterThan(0);
      expect(sc?.readOnlyRootFilesystem).toBe(true);
      expect(sc?.allowPrivilegeEscalation).toBe(false);
      expect(sc?.capabilities?.drop).toContain('ALL');
      expect(relay.securityContext?.allowPrivilegeEscalation).toBe(false);
      expect(pod.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
      // A Service named "sluice" would otherwise inject SLUICE_PORT=tcp://... into the sidecar.
      expect(pod.enableServiceLinks).toBe(false);

      const adminPort = containerPort(sidecar, 'admin');
      const publicPort = containerPort(sidecar, 'http');
      expect(adminPort).not.toBe(publicPort);
      // The program listens where the ports say (program defaults: 8080 and 9090).
      expect(Number(envVar(sidecar, 'SLUICE_ADMIN_PORT')?.value ?? 9090)).toBe(adminPort);
      expect(Number(envVar(sidecar, 'SLUICE_PORT')?.value ?? 8080)).toBe(publicPort);

      expect(httpProbe(sidecar, sidecar.livenessProbe, 'livenessProbe')).toEqual({ path: '/healthz', port: adminPort });
      expect(httpProbe(sidecar, sidecar.readinessProbe, 'readinessProbe')).toEqual({ path: '/readyz', port: adminPort });
      if (sidecar.startupProbe) {
        expect(httpProbe(sidecar, sidecar.startupProbe, 'startupProbe')).toEqual({ path: '/healthz', port: adminPort });
      }
    });

    it('sizes sluice from the measurements', () => {
      const { sidecar } = sluicePod(kustomize(dir));
      const r = sidecar.resources;
      const MB = 1e6;
      const reqMem = quantity(r?.requests?.memory, 'requests.memory');
      const limMem = quantity(r?.limits?.memory, 'limits.memory');
      expect(reqMem).toBeGreaterThanOrEqual(MEASURED_IDLE_MB * MB);
      expect(limMem).toBeGreaterThanOrEqual(MEASURED_PEAK_MB * MB * 1.5);
      expect(quantity(r?.requests?.cpu, 'requests.cpu')).toBeGreaterThan(0);
      expect(quantity(r?.limits?.cpu, 'limits.cpu')).toBeGreaterThanOrEqual(1);
      // V8's heap cap, when set, must leave room below the container limit.
      const heap = /--max-old-space-size=(\d+)/.exec(envVar(sidecar, 'NODE_OPTIONS')?.value ?? '');
      if (heap) expect(Number(heap[1]) * 2 ** 20).toBeLessThan(limMem - 64 * 2 ** 20);
    });

    it('mounts the limits config as a hot-reloadable directory and points SLUICE_CONFIG into it', () => {
      const objects = kustomize(dir);
      const { pod, sidecar } = sluicePod(objects);
      const { mount, configMap, fileName, files } = configMount(objects, pod, sidecar);
      // subPath mounts never see ConfigMap updates.
      expect(mount.subPath).toBeUndefined();
      expect(mount.subPathExpr).toBeUndefined();
      expect(mount.readOnly).toBe(true);
      expect(fileName).toBe(NAMES.configFile);
      expect(files.has(fileName)).toBe(true);
      // A stable name (no generator hash): `kubectl apply` updates it in place and sluice reloads the
      // file; a hashed name would replace the Pods instead.
      expect(configMap.metadata?.name).toMatch(/^sluice-config(?:-[a-z0-9-]+)?$/);
      expect(configMap.metadata?.name).not.toMatch(/-[a-z0-9]{10}$/);
    });

    it("the ConfigMap's config file is accepted by the program's config loader", () => {
      const objects = kustomize(dir);
      const { pod, sidecar } = sluicePod(objects);
      const { files, fileName } = configMount(objects, pod, sidecar);
      const doc = (parseYaml(files.get(fileName)!) ?? {}) as Record<string, unknown>;
      const env: Record<string, string> = { SLUICE_ADMIN_TOKEN: 'x'.repeat(32), SLUICE_REDIS_URL: 'redis://127.0.0.1:6379' };
      for (const e of sidecar.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
      expect(() => buildConfig(doc, env)).not.toThrow();
    });

    it('every SLUICE_* variable of the sidecar is one the program reads', () => {
      const { sidecar } = sluicePod(kustomize(dir));
      const names = (sidecar.env ?? []).map((e) => e.name).filter((n) => n.startsWith('SLUICE_'));
      const unknown = names.filter((n) => !(n in ENV_VARS));
      expect(unknown, `not in ENV_VARS of src/config/index.ts: ${unknown.join(', ')}`).toEqual([]);
    });

    it("drains sluice inside the relay's preStop hook, through a volume only the two containers share; the hook's bound and the grace period follow from drainSeconds", () => {
      const objects = kustomize(dir);
      const { pod, sidecar, relay } = sluicePod(objects);
      const { files, fileName } = configMount(objects, pod, sidecar);
      // SLUICE_DRAIN_SECONDS, when set, wins over the file.
      const fromEnv = envVar(sidecar, 'SLUICE_DRAIN_SECONDS')?.value;
      const drain = fromEnv !== undefined ? Number(fromEnv) : drainSecondsOf(files, fileName);
      // The relay stops before sluice (a native sidecar stops last), so sluice must drain while the
      // relay runs: the relay's preStop hook asks for it in the directory sluice watches.
      const hook = shutdownHook(pod, sidecar, relay, DRAIN_REQUEST_FILE, DRAIN_DONE_FILE);
      // Only the Pod's own containers can start a drain: the volume is an emptyDir (it lives and
      // dies with this Pod), mounted by sluice and the relay and by nothing else.
      expect((pod.volumes ?? []).find((v) => v.name === hook.volume)?.emptyDir).toBeDefined();
      const mounting = [...(pod.initContainers ?? []), ...pod.containers].filter((c) => (c.volumeMounts ?? []).some((m) => m.name === hook.volume));
      expect(mounting.map((c) => c.name).sort()).toEqual([NAMES.relay, NAMES.sidecar].sort());
      expect((sidecar.volumeMounts ?? []).find((m) => m.name === hook.volume)?.readOnly).not.toBe(true);
      expect((relay.volumeMounts ?? []).find((m) => m.name === hook.volume)?.readOnly).not.toBe(true);
      // The hook gives sluice its whole drain, and then some, before the relay stops.
      expect(hook.endpointWaitSeconds).toBeGreaterThan(0);
      expect(hook.answerWaitSeconds).toBeGreaterThanOrEqual(drain + SHUTDOWN_BUDGET.hookSlackSeconds);
      // The grace period holds the hook, the relay's stop and sluice's exit (docs/kubernetes.md).
      const grace = pod.terminationGracePeriodSeconds ?? 30;
      expect(grace).toBeGreaterThanOrEqual(hook.endpointWaitSeconds + hook.answerWaitSeconds + hook.relayStopSeconds + SHUTDOWN_BUDGET.sluiceExitSeconds);
    });

    it('sends sluice to the relay over loopback, on the port the relay listens on', () => {
      const { sidecar, relay } = sluicePod(kustomize(dir));
      const upstream = new URL(envVar(sidecar, 'SLUICE_UPSTREAM_URL')?.value ?? '');
      expect(upstream.protocol).toBe('http:');
      expect(upstream.hostname).toBe('127.0.0.1');
      expect(upstream.port).toBe(envVar(relay, 'PORT')?.value);
      // The relay's port is not declared, so nothing can name it; it is reachable only in the Pod.
      expect(relay.ports ?? []).toEqual([]);
    });

    it('reads secrets only from the operator Secret (keys as in secret.example.yaml) or generated ones', () => {
      const objects = kustomize(dir);
      const { sidecar } = sluicePod(objects);
      const example = readSecretExample();
      const exampleKeys = new Set([...Object.keys(example.stringData ?? {}), ...Object.keys(example.data ?? {})]);
      const { relay } = sluicePod(objects);
      for (const e of sidecar.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref) {
          if (relayReadsSecret(relay, ref.name!)) {
            // The relay's own Secret: only its database address, read from the key the relay reads.
            expect([e.name, ref.key]).toEqual(['SLUICE_RELAY_DB', 'SQL_DSN']);
          } else if (ref.name === NAMES.secret) {
            expect(exampleKeys.has(ref.key), `${e.name}: key ${ref.key} missing from secret.example.yaml`).toBe(true);
            // Never generated into the build: `kubectl apply -k` must not overwrite a rotated token.
            expect(objects.some((o) => o.kind === 'Secret' && o.metadata.name === NAMES.secret)).toBe(false);
          } else {
            const generated = one<ISecret>(objects, 'Secret', ref.name!);
            expect(decodeSecret(generated, ref.key), `${e.name}: key ${ref.key} in Secret ${ref.name}`).toBeDefined();
          }
        }
        const cmRef = e.valueFrom?.configMapKeyRef;
        if (cmRef) expect(one<IConfigMap>(objects, 'ConfigMap', cmRef.name!).data?.[cmRef.key]).toBeDefined();
      }
      expect(envVar(sidecar, 'SLUICE_ADMIN_TOKEN')?.valueFrom?.secretKeyRef?.name).toBe(NAMES.secret);
      expect(envVar(sidecar, 'SLUICE_REDIS_URL')?.valueFrom?.secretKeyRef).toBeDefined();
    });

    it('keeps two or more replicas on a shared Redis, with a PodDisruptionBudget of minAvailable 1 (one replica, replaced whole, for a relay on SQLite)', () => {
      const objects = kustomize(dir);
      const { deployment, sidecar } = sluicePod(objects);
      if (envVar(sidecar, 'SLUICE_RELAY_DB')?.value?.startsWith('sqlite:')) {
        // One writer of the SQLite file: the old Pod stops before the new one starts, and no
        // budget of one available Pod blocks every node drain.
        expect(deployment.spec?.replicas).toBe(1);
        expect(deployment.spec?.strategy?.type).toBe('Recreate');
        expect(byKind(objects, 'PodDisruptionBudget')).toEqual([]);
        return;
      }
      expect(deployment.spec?.replicas).toBeGreaterThanOrEqual(2);
      expect(envVar(sidecar, 'SLUICE_REDIS_URL')).toBeDefined();
      const podLabels = deployment.spec?.template.metadata?.labels;
      const pdbs = byKind<IPodDisruptionBudget>(objects, 'PodDisruptionBudget').filter((p) => labelsMatch(p.spec?.selector?.matchLabels, podLabels));
      expect(pdbs).toHaveLength(1);
      expect(pdbs[0]!.spec?.minAvailable).toBe(1);
    });

    it("reads the keys made in the relay's console from the relay's own database: the Secret key the relay reads, or its SQLite file read-only", () => {
      const { sidecar, relay } = sluicePod(kustomize(dir));
      const v = envVar(sidecar, 'SLUICE_RELAY_DB');
      expect(v, 'SLUICE_RELAY_DB is not set on the sidecar').toBeDefined();
      if (v!.value !== undefined) {
        expect(v!.value).toMatch(/^sqlite:\//);
        const path = v!.value.slice('sqlite:'.length);
        const mount = (sidecar.volumeMounts ?? []).find((m) => path.startsWith(`${m.mountPath}/`));
        expect(mount, `no volume mounted where ${path} is`).toBeDefined();
        expect(mount!.readOnly).toBe(true);
        const relayMount = (relay.volumeMounts ?? []).find((m) => m.name === mount!.name);
        expect(relayMount, 'the relay does not mount that volume').toBeDefined();
        expect(relayMount!.readOnly ?? false).toBe(false);
        // new-api writes one-api.db in its working directory, /data in its image.
        expect(relayMount!.mountPath + path.slice(mount!.mountPath.length)).toBe('/data/one-api.db');
      } else {
        const ref = v!.valueFrom?.secretKeyRef;
        if (ref?.name === NAMES.secret) {
          // The relay-db-readonly Component: a read-only user's address, which the operator writes;
          // required, so a Secret without it shows at once instead of a sluice without the relay's keys.
          expect(ref.key).toBe('relay-db-url');
          expect(ref.optional ?? false).toBe(false);
          return;
        }
        expect(ref?.key).toBe('SQL_DSN');
        expect(relayReadsSecret(relay, ref!.name!), `the relay does not read Secret ${ref!.name}`).toBe(true);
        // Optional: a relay on SQLite has no SQL_DSN, and sluice then runs on its own registry.
        expect(ref!.optional).toBe(true);
      }
    });

    it('announces /metrics on the admin port to Prometheus', () => {
      const { deployment, sidecar } = sluicePod(kustomize(dir));
      const a = deployment.spec?.template.metadata?.annotations ?? {};
      expect(a['prometheus.io/scrape']).toBe('true');
      expect(Number(a['prometheus.io/port'])).toBe(containerPort(sidecar, 'admin'));
      expect(a['prometheus.io/path']).toBe('/metrics');
    });

    it("exposes only sluice's public port in the Service; no Service reaches the relay", () => {
      const objects = kustomize(dir);
      const { sidecar } = sluicePod(objects);
      const publicPort = containerPort(sidecar, 'http');
      const adminPort = containerPort(sidecar, 'admin');

      const { service: pub } = publicService(objects);
      expect(pub.spec?.ports).toHaveLength(1);
      for (const svc of podServices(objects)) {
        for (const p of svc.spec?.ports ?? []) {
          // By number: Services resolve named ports of sidecar (init) containers only from
          // Kubernetes 1.32 on (kubernetes/kubernetes#127958).
          expect(typeof (p.targetPort ?? p.port), `Service ${svc.metadata?.name}: targetPort by number`).toBe('number');
          const target = resolvePort(sidecar, p.targetPort ?? p.port);
          expect([publicPort, adminPort], `Service ${svc.metadata?.name} port ${p.port}`).toContain(target);
          // The admin port stays inside the cluster.
          if (target === adminPort) expect(svc.spec?.type ?? 'ClusterIP').toBe('ClusterIP');
        }
      }
    });

    it('NetworkPolicy: public port from anywhere, admin port only from inside the cluster, nothing else', () => {
      const objects = kustomize(dir);
      const { deployment, sidecar } = sluicePod(objects);
      const podLabels = deployment.spec?.template.metadata?.labels;
      const publicPort = containerPort(sidecar, 'http');
      const adminPort = containerPort(sidecar, 'admin');
      const policies = byKind<INetworkPolicy>(objects, 'NetworkPolicy').filter((p) => labelsMatch(p.spec?.podSelector.matchLabels, podLabels));
      expect(policies).toHaveLength(1);
      const spec = policies[0]!.spec!;
      expect(spec.policyTypes).toContain('Ingress');

      const admitted = new Map<number, { fromAnywhere: boolean; peers: unknown[] }[]>();
      for (const rule of spec.ingress ?? []) {
        // A rule without ports admits every port, the relay's included.
        expect(rule.ports?.length, 'an ingress rule without ports').toBeGreaterThan(0);
        for (const p of rule.ports!) {
          // By number: some network plugins do not resolve named ports of sidecar (init)
          // containers (projectcalico/calico#8881).
          expect(typeof p.port, 'NetworkPolicy port by number').toBe('number');
          const port = resolvePort(sidecar, p.port);
          expect(p.protocol ?? 'TCP').toBe('TCP');
          expect(p.endPort).toBeUndefined();
          const list = admitted.get(port) ?? [];
          list.push({ fromAnywhere: !rule.from?.length, peers: rule.from ?? [] });
          admitted.set(port, list);
        }
      }
      expect([...admitted.keys()].sort()).toEqual([publicPort, adminPort].sort());
      expect(admitted.get(publicPort)!.some((r) => r.fromAnywhere)).toBe(true);
      for (const r of admitted.get(adminPort)!) {
        expect(r.fromAnywhere, 'admin port open to anywhere').toBe(false);
        // Pods of the cluster only: namespace/pod selectors, never an ipBlock.
        for (const peer of r.peers as Record<string, unknown>[]) {
          expect(peer.ipBlock).toBeUndefined();
          expect(peer.namespaceSelector ?? peer.podSelector).toBeDefined();
        }
      }
    });
  });

  it('dev-redis: brings its own Redis, reachable only from the sluice Pods, and points sluice at it', () => {
    const objects = kustomize('deploy/overlays/dev-redis');
    const { sidecar, deployment } = sluicePod(objects);
    const ref = envVar(sidecar, 'SLUICE_REDIS_URL')?.valueFrom?.secretKeyRef;
    const url = new URL(decodeSecret(one<ISecret>(objects, 'Secret', ref!.name!), ref!.key)!);
    expect(url.protocol).toBe('redis:');
    const svc = one<IService>(objects, 'Service', url.hostname);
    expect(svc.spec?.ports?.map((p) => p.port)).toContain(Number(url.port || 6379));
    const redis = one<{ spec: { template: { metadata: { labels: Record<string, string> } } } }>(objects, 'Deployment', url.hostname);
    expect(labelsMatch(svc.spec?.selector, redis.spec.template.metadata.labels)).toBe(true);
    const np = byKind<INetworkPolicy>(objects, 'NetworkPolicy').find((p) => labelsMatch(p.spec?.podSelector.matchLabels, redis.spec.template.metadata.labels));
    expect(np).toBeDefined();
    const peers = (np!.spec?.ingress ?? []).flatMap((r) => r.from ?? []);
    expect(peers.length).toBeGreaterThan(0);
    for (const peer of peers) expect(labelsMatch(peer.podSelector?.matchLabels, deployment.spec?.template.metadata?.labels)).toBe(true);
  });

  it('managed-redis: one Redis endpoint, its URL from the operator Secret; no Sentinel unless a Component adds it', () => {
    const objects = kustomize('deploy/overlays/managed-redis');
    const { sidecar } = sluicePod(objects);
    expect(envVar(sidecar, 'SLUICE_REDIS_URL')?.valueFrom?.secretKeyRef).toMatchObject({ name: NAMES.secret, key: 'redis-url' });
    expect((sidecar.env ?? []).map((e) => e.name).filter((n) => n.startsWith('SLUICE_REDIS_'))).toEqual(['SLUICE_REDIS_URL']);
    // So do the examples built on it.
    for (const dir of ['deploy/examples/existing-new-api', 'deploy/examples/two-channels']) {
      expect(envVar(sluicePod(kustomize(dir)).sidecar, 'SLUICE_REDIS_SENTINELS'), dir).toBeUndefined();
    }
  });

  it("the opt-in Components (the reader's production overlay adds both): Sentinel and a read-only relay database user, every address from keys of the operator Secret, required", () => {
    const base = sluicePod(kustomize('deploy/overlays/managed-redis')).sidecar;
    const { sidecar } = sluicePod(kustomize('deploy/overlays/production'));
    const fromSecret = (name: string) => envVar(sidecar, name)?.valueFrom?.secretKeyRef;
    expect(fromSecret('SLUICE_REDIS_SENTINELS')).toEqual({ name: NAMES.secret, key: 'redis-sentinels' });
    expect(fromSecret('SLUICE_REDIS_SENTINEL_NAME')).toEqual({ name: NAMES.secret, key: 'redis-sentinel-name' });
    expect(fromSecret('SLUICE_RELAY_DB')).toEqual({ name: NAMES.secret, key: 'relay-db-url', optional: false });
    // Nothing else of the sidecar changes (but the image the reader names).
    const rest = (c: IContainer) => ({
      ...c,
      image: '',
      env: (c.env ?? []).filter((e) => !['SLUICE_REDIS_SENTINELS', 'SLUICE_REDIS_SENTINEL_NAME', 'SLUICE_RELAY_DB'].includes(e.name)),
    });
    expect(rest(sidecar)).toEqual(rest(base));
    expect(sidecar.image).toBe(READER_VALUES.SLUICE_IMAGE);
  });

  it('two-channels example: does not build until the reader wrote its hosts and CIDR; then both of those hostnames reach the one public Service (same Pods, keys and limits)', () => {
    // As it is in the repository: the build fails, naming the file the reader has yet to write.
    const unset = buildIn(ROOT, 'deploy/examples/two-channels');
    expect(unset.status).not.toBe(0);
    expect(unset.stderr).toMatch(/channels\.env|config\.yaml/);
    const objects = kustomize('deploy/examples/two-channels');
    const { service: pub } = publicService(objects);
    const portOk = (p: { name?: string; number?: number } | undefined): boolean =>
      (pub.spec?.ports ?? []).some((sp) => (p?.name !== undefined && sp.name === p.name) || (p?.number !== undefined && sp.port === p.number));
    const ingresses = byKind<IIngress>(objects, 'Ingress');
    const hosts = new Set<string>();
    for (const ing of ingresses) {
      for (const rule of ing.spec?.rules ?? []) {
        if (rule.host) hosts.add(rule.host);
        for (const path of rule.http?.paths ?? []) {
          expect(path.backend.service?.name).toBe(pub.metadata?.name);
          expect(portOk(path.backend.service?.port)).toBe(true);
        }
      }
    }
    expect([...hosts].sort()).toEqual([READER_VALUES.FOREIGN_HOST, READER_VALUES.DOMESTIC_HOST].sort());
    for (const ing of ingresses) {
      expect(ing.spec?.tls?.flatMap((t) => t.hosts ?? [])).toEqual(ing.spec?.rules?.map((r) => r.host));
      expect([READER_VALUES.FOREIGN_INGRESS_CLASS, READER_VALUES.DOMESTIC_INGRESS_CLASS]).toContain(ing.spec?.ingressClassName);
    }
    // The reader's settings file is only read by the build, never applied.
    expect(byKind(objects, 'ConfigMap').map((c) => c.metadata.name)).not.toContainEqual(expect.stringMatching(/^two-channels/));
    // Behind an Ingress controller sluice must trust its X-Forwarded-For, or all clients share one IP.
    const { pod, sidecar } = sluicePod(objects);
    const { files, fileName } = configMount(objects, pod, sidecar);
    const cfg = parseYaml(files.get(fileName)!) as { trustedProxies?: string[] };
    expect(cfg.trustedProxies).toEqual([READER_VALUES.INGRESS_POD_CIDR]);
    // Otherwise the very limits of the base (the example's file is a copy that must not drift).
    const baseObjects = kustomize('deploy/base');
    const baseFiles = configMount(baseObjects, sluicePod(baseObjects).pod, sluicePod(baseObjects).sidecar).files;
    const baseCfg = parseYaml(baseFiles.get(fileName)!) as Record<string, unknown>;
    expect({ ...cfg, trustedProxies: [] }).toEqual({ ...baseCfg, trustedProxies: [] });
  });

  it('existing-new-api example: every selector needs the new instance label, so the current Pods are untouched', () => {
    const objects = kustomize('deploy/examples/existing-new-api');
    const instance = { 'app.kubernetes.io/instance': 'new-api-sluice' };
    const { deployment, pod } = sluicePod(objects);
    const selectors: [string, Record<string, string> | undefined][] = [
      ['Deployment', deployment.spec?.selector.matchLabels],
      ...podServices(objects).map((s): [string, Record<string, string> | undefined] => [`Service ${s.metadata?.name}`, s.spec?.selector]),
      ...byKind<IPodDisruptionBudget>(objects, 'PodDisruptionBudget').map((p): [string, Record<string, string> | undefined] => [
        `PodDisruptionBudget ${p.metadata?.name}`,
        p.spec?.selector?.matchLabels,
      ]),
      ...byKind<INetworkPolicy>(objects, 'NetworkPolicy').map((p): [string, Record<string, string> | undefined] => [
        `NetworkPolicy ${p.metadata?.name}`,
        p.spec?.podSelector.matchLabels,
      ]),
      ...(pod.topologySpreadConstraints ?? []).map((t): [string, Record<string, string> | undefined] => ['topologySpread', t.labelSelector?.matchLabels]),
    ];
    expect(podServices(objects).length).toBeGreaterThan(0);
    for (const [what, sel] of selectors) expect(sel, what).toMatchObject(instance);
    // The operator's Secrets keep their names.
    const { sidecar } = sluicePod(objects);
    expect(envVar(sidecar, 'SLUICE_ADMIN_TOKEN')?.valueFrom?.secretKeyRef?.name).toBe(NAMES.secret);
  });

  it.each(APPLIED)("%s: sluice and the relay are as in the base but for Redis settings, images and where the relay's database is", (dir) => {
    const strip = (c: IContainer): IContainer => ({
      ...c,
      image: '', // where the operator keeps the image
      env: (c.env ?? []).filter((e) => !e.name.startsWith('SLUICE_REDIS_') && e.name !== 'SLUICE_RELAY_DB').sort((a, b) => a.name.localeCompare(b.name)),
      // A relay on SQLite: its data volume, mounted read-only (checked above, with SLUICE_RELAY_DB).
      volumeMounts: (c.volumeMounts ?? []).filter((m) => !(m.readOnly && m.name === 'relay-data')),
    });
    const base = sluicePod(kustomize('deploy/base'));
    const other = sluicePod(kustomize(dir));
    expect(strip(other.sidecar)).toEqual(strip(base.sidecar));
    // The relay may run another new-api version; nothing else of it changes.
    expect({ ...other.relay, image: '' }).toEqual({ ...base.relay, image: '' });
  });
});

describe.skipIf(kubectlMode === 'skip')('deploy config files', () => {
  it("two-channels example: the config the reader's step writes differs from the base config only in trustedProxies", () => {
    const read = (path: string): Record<string, unknown> => parseYaml(readFileSync(join(readerCopy(), path), 'utf8')) as Record<string, unknown>;
    const { trustedProxies: baseProxies, ...base } = read('deploy/base/config.yaml');
    const { trustedProxies: exampleProxies, ...example } = read('deploy/examples/two-channels/config.yaml');
    expect(example).toEqual(base);
    expect(baseProxies).toEqual([]);
    expect(exampleProxies).toEqual([READER_VALUES.INGRESS_POD_CIDR]);
  });
});
