/**
 * Helpers for the deploy tests: build the kustomizations with `kubectl kustomize` (offline), parse
 * the output, validate every object against the Kubernetes schemas of kubernetes-models, and find
 * the parts of the Pod the tests look at.
 *
 * Without kubectl the manifest tests skip locally, but fail loudly when CI is set.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { IProbe } from 'kubernetes-models/v1/Probe';
import { Secret } from 'kubernetes-models/v1/Secret';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import type { IService } from 'kubernetes-models/v1/Service';
import { Service } from 'kubernetes-models/v1/Service';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { findOnPath } from '../support/redis.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every kustomization under deploy/ that the tests build. A test checks the list is complete. */
export const KUSTOMIZATIONS = [
  'deploy/base',
  'deploy/overlays/dev-redis',
  'deploy/overlays/managed-redis',
  'deploy/examples/existing-new-api',
  'deploy/examples/two-channels',
  'deploy/examples/new-api-sqlite',
] as const;

/** The opt-in Components under deploy/ (kind: Component): built only inside an overlay that adds them. */
export const COMPONENTS = ['deploy/components/prometheus-rule', 'deploy/components/relay-db-readonly', 'deploy/components/sentinel'] as const;

/**
 * Overlays the reader writes by following docs/kubernetes.md: its blocks marked
 * `<!-- test/deploy: run -->` write them (READER_VALUES stand for the reader's values).
 */
export const READER_OVERLAYS = ['deploy/overlays/try', 'deploy/overlays/production'] as const;

/** Everything the tests build: the repository's kustomizations and the reader's overlays. */
export const BUILT: readonly string[] = [...KUSTOMIZATIONS, ...READER_OVERLAYS];

/** The kustomizations an operator applies (the base is only built on top of). */
export const APPLIED = BUILT.filter((k) => k !== 'deploy/base');

/**
 * What the reader writes where docs/kubernetes.md asks for their own values (the shell variables
 * its marked blocks read). Addresses of the reader's own, so a build may contain them and no other.
 */
export const READER_VALUES: Readonly<Record<string, string>> = Object.freeze({
  FOREIGN_HOST: 'api.reader-foreign.net',
  DOMESTIC_HOST: 'api.reader-domestic.net',
  FOREIGN_INGRESS_CLASS: 'reader-foreign-class',
  DOMESTIC_INGRESS_CLASS: 'reader-domestic-class',
  INGRESS_POD_CIDR: '10.91.0.0/16',
  SLUICE_IMAGE: 'registry.reader-images.net/sluice:0.2.0',
  NEW_API_IMAGE: 'calciumion/new-api:v0.9.0',
});

/** The marker of a docs/kubernetes.md block the tests run, as a reader would, before building. */
export const RUN_MARKER = '<!-- test/deploy: run -->';

/** The shell blocks of docs/kubernetes.md marked RUN_MARKER, in order. */
export function readerBlocks(page = readFileSync(join(ROOT, 'docs/kubernetes.md'), 'utf8')): string[] {
  const blocks: string[] = [];
  const marker = RUN_MARKER.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The fence's indentation (a block inside a list item) is not part of the commands.
  const re = new RegExp(marker + '[ \\t]*\\n+( *)```sh\\n([\\s\\S]*?)\\n *```', 'g');
  for (const m of page.matchAll(re)) blocks.push(m[2]!.replace(new RegExp(`^${m[1]}`, 'gm'), ''));
  return blocks;
}

let readerRoot: string | undefined;

/**
 * A copy of the repository's deploy/ in a temporary directory, after the reader's steps: every
 * marked block of docs/kubernetes.md run there by bash, with READER_VALUES set. The builds read
 * this copy, so the repository is never written to.
 */
export function readerCopy(): string {
  if (readerRoot !== undefined) return readerRoot;
  const root = mkdtempSync(join(tmpdir(), 'sluice-deploy-'));
  cpSync(join(ROOT, 'deploy'), join(root, 'deploy'), { recursive: true });
  for (const block of readerBlocks()) {
    const r = spawnSync('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', block], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
      timeout: 30_000,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root, ...READER_VALUES },
    });
    if (r.status !== 0) {
      rmSync(root, { recursive: true, force: true });
      throw new Error(`a docs/kubernetes.md block failed as the reader would run it (exit ${r.status}):\n${block}\n${r.stderr}`);
    }
  }
  return (readerRoot = root);
}

// Each test file that builds gets its own copy (a module per file), removed when the file is done.
afterAll(() => {
  if (readerRoot !== undefined) rmSync(readerRoot, { recursive: true, force: true });
  readerRoot = undefined;
  built.clear();
});

/** Names the manifests use (before an overlay's namePrefix/nameSuffix). */
export const NAMES = {
  sidecar: 'sluice',
  relay: 'relay',
  configFile: 'config.yaml',
  /** The Secret the operator creates (deploy/base/secret.example.yaml); never generated. */
  secret: 'sluice',
} as const;

export const KUBECTL = findOnPath('kubectl');

/**
 * 'run' when kubectl is there, or when CI is set (then every build fails with a clear message
 * instead of the tests skipping); 'skip' only on a developer machine without kubectl.
 */
export const kubectlMode: 'run' | 'skip' = KUBECTL || process.env.CI ? 'run' : 'skip';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

const built = new Map<string, K8sObject[]>();

/** `kubectl kustomize <dir>` (relative to the repository root), parsed. Cached per directory. */
export function kustomize(dir: string): K8sObject[] {
  const cached = built.get(dir);
  if (cached) return cached;
  if (!KUBECTL) {
    throw new Error(
      `kubectl is not on PATH, so ${dir} cannot be built with \`kubectl kustomize\`. ` +
        'Install it (Debian: apt-get install -y kubectl; .ci/run does this).' +
        (process.env.CI ? ' CI is set: the deploy tests must run here, they are not skipped.' : ''),
    );
  }
  const r = buildIn(readerCopy(), dir);
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed (exit ${r.status}):\n${r.stderr}`);
  const objects = parseManifests(r.stdout, `kubectl kustomize ${dir}`);
  built.set(dir, objects);
  return objects;
}

/** `kubectl kustomize <dir>` in `root` (a checkout), as it is: its exit status, output and errors. */
export function buildIn(root: string, dir: string): { status: number | null; stdout: string; stderr: string } {
  if (!KUBECTL) throw new Error('kubectl is not on PATH');
  const r = spawnSync(KUBECTL, ['kustomize', dir], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new Error(`kubectl kustomize ${dir} could not run: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** All YAML documents of a multi-document stream, as plain objects; empty documents dropped. */
export function parseManifests(text: string, where: string): K8sObject[] {
  const out: K8sObject[] = [];
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return out; // an empty stream
  docs.forEach((doc, i) => {
    if (doc.errors.length) throw new Error(`${where}: document ${i} is not valid YAML: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return;
    if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: document ${i} is not a mapping`);
    const o = value as Partial<K8sObject>;
    if (typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
      throw new Error(`${where}: document ${i} lacks apiVersion, kind or metadata.name`);
    }
    out.push(o as K8sObject);
  });
  return out;
}

/** Directories under deploy/ holding a kustomization file, by its kind (Kustomization or Component). */
export function findKustomizations(kind: 'Kustomization' | 'Component' = 'Kustomization', dir = join(ROOT, 'deploy')): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir)) {
    const p = join(dir, entry);
    if (statSync(p).isDirectory()) found.push(...findKustomizations(kind, p));
    else if (/^kustomization\.ya?ml$|^Kustomization$/.test(entry)) {
      const doc = (parseYaml(readFileSync(p, 'utf8')) ?? {}) as { kind?: string };
      if ((doc.kind ?? 'Kustomization') === kind) found.push(relative(ROOT, dir).split('\\').join('/'));
    }
  }
  return found.sort();
}

// ---------------------------------------------------------------------------------------------
// Validation against the Kubernetes schemas

interface ModelClass {
  new (data: never): { validate(): void };
}

/** Every kind the manifests may emit: the model class and its declaration file (for field names). */
const MODELS: Record<string, { model: ModelClass; dts: string; iface: string }> = {
  'apps/v1/Deployment': { model: Deployment as unknown as ModelClass, dts: 'apps/v1/Deployment.d.ts', iface: 'IDeployment' },
  'v1/Service': { model: Service as unknown as ModelClass, dts: 'v1/Service.d.ts', iface: 'IService' },
  'v1/ConfigMap': { model: ConfigMap as unknown as ModelClass, dts: 'v1/ConfigMap.d.ts', iface: 'IConfigMap' },
  'v1/Secret': { model: Secret as unknown as ModelClass, dts: 'v1/Secret.d.ts', iface: 'ISecret' },
  'v1/PersistentVolumeClaim': {
    model: PersistentVolumeClaim as unknown as ModelClass,
    dts: 'v1/PersistentVolumeClaim.d.ts',
    iface: 'IPersistentVolumeClaim',
  },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget as unknown as ModelClass,
    dts: 'policy/v1/PodDisruptionBudget.d.ts',
    iface: 'IPodDisruptionBudget',
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    model: NetworkPolicy as unknown as ModelClass,
    dts: 'networking.k8s.io/v1/NetworkPolicy.d.ts',
    iface: 'INetworkPolicy',
  },
  'networking.k8s.io/v1/Ingress': { model: Ingress as unknown as ModelClass, dts: 'networking.k8s.io/v1/Ingress.d.ts', iface: 'IIngress' },
};

export const KNOWN_KINDS = Object.keys(MODELS);

const MODELS_DIR = join(ROOT, 'node_modules', 'kubernetes-models');

/**
 * Problems with one object: schema errors from kubernetes-models (types, required fields, enums)
 * and field names the Kubernetes API does not know (kubernetes-models does not check those; a typo
 * such as `readOnlyRootFileSystem` would otherwise pass and be dropped by the API server).
 */
export function validateObject(obj: K8sObject): string[] {
  const key = `${obj.apiVersion}/${obj.kind}`;
  const entry = MODELS[key];
  if (!entry) return [`${obj.kind}/${obj.metadata.name}: no schema registered for ${key} (add it to MODELS in test/deploy/k8s.ts)`];
  const problems: string[] = [];
  try {
    new entry.model(obj as never).validate();
  } catch (err) {
    problems.push(`${obj.kind}/${obj.metadata.name}: ${err instanceof Error ? err.message : String(err)}`);
  }
  for (const path of unknownFields(obj, entry.dts, entry.iface)) {
    problems.push(`${obj.kind}/${obj.metadata.name}: unknown field ${path}`);
  }
  return problems;
}

let checker: ts.TypeChecker | undefined;
let program: ts.Program | undefined;

/** One TypeScript program over the model declaration files, used as a field-name schema. */
function typeOfModel(dts: string, iface: string): ts.Type {
  if (!program) {
    const roots = Object.values(MODELS).map((m) => join(MODELS_DIR, m.dts));
    program = ts.createProgram(roots, {
      noEmit: true,
      skipLibCheck: true,
      types: [],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
    });
    checker = program.getTypeChecker();
  }
  const file = program.getSourceFile(join(MODELS_DIR, dts));
  if (!file) throw new Error(`cannot load ${dts} from kubernetes-models`);
  for (const stmt of file.statements) {
    if (ts.isInterfaceDeclaration(stmt) && stmt.name.text === iface) {
      return checker!.getDeclaredTypeOfSymbol(checker!.getSymbolAtLocation(stmt.name)!);
    }
  }
  throw new Error(`interface ${iface} not found in kubernetes-models/${dts}`);
}

function unknownFields(obj: K8sObject, dts: string, iface: string): string[] {
  const found: string[] = [];
  const c = (): ts.TypeChecker => checker!;
  const walk = (value: unknown, type: ts.Type, path: string): void => {
    let t = c().getNonNullableType(type);
    if (t.isUnion()) {
      const objects = t.types.filter((u) => (u.flags & ts.TypeFlags.Object) !== 0);
      if (objects.length !== 1) return; // e.g. IntOrString: a scalar, checked by the schema
      t = objects[0]!;
    }
    if (Array.isArray(value)) {
      if (!c().isArrayType(t)) return;
      const element = c().getTypeArguments(t as ts.TypeReference)[0];
      if (element) {
        for (const [i, v] of value.entries()) walk(v, element, `${path}[${i}]`);
      }
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const props = c().getPropertiesOfType(t);
    const index = c().getIndexInfoOfType(t, ts.IndexKind.String);
    if (props.length === 0) {
      if (index) for (const [k, v] of Object.entries(value)) walk(v, index.type, `${path}.${k}`);
      return; // a free-form object
    }
    for (const [k, v] of Object.entries(value)) {
      const prop = t.getProperty(k);
      if (!prop) {
        if (index) walk(v, index.type, `${path}.${k}`);
        else found.push(`${path}.${k}`);
        continue;
      }
      walk(v, c().getTypeOfSymbol(prop), `${path}.${k}`);
    }
  };
  walk(obj, typeOfModel(dts, iface), '');
  return found.map((p) => p.replace(/^\./, ''));
}

// ---------------------------------------------------------------------------------------------
// Finding things

export function byKind<T = K8sObject>(objects: K8sObject[], kind: string): T[] {
  return objects.filter((o) => o.kind === kind) as unknown as T[];
}

export function one<T = K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (found.length !== 1) throw new Error(`expected exactly one ${kind} named ${name}, found ${found.length}`);
  return found[0] as unknown as T;
}

/** The one Deployment that carries sluice, its Pod spec, the sluice sidecar and the relay container. */
export function sluicePod(objects: K8sObject[]): { deployment: IDeployment; pod: IPodSpec; sidecar: IContainer; relay: IContainer } {
  const found = (objects.filter((o) => o.kind === 'Deployment') as unknown as IDeployment[]).filter((d) =>
    (d.spec?.template.spec?.initContainers ?? []).some((c) => c.name === NAMES.sidecar),
  );
  if (found.length !== 1) throw new Error(`expected one Deployment with an init container named ${NAMES.sidecar}, found ${found.length}`);
  const deployment = found[0]!;
  const name = deployment.metadata?.name;
  const pod = deployment.spec!.template.spec!;
  const sidecar = pod.initContainers!.find((ct) => ct.name === NAMES.sidecar)!;
  const relay = pod.containers.find((ct) => ct.name === NAMES.relay);
  if (!relay) throw new Error(`Deployment ${name}: no container named ${NAMES.relay}`);
  return { deployment, pod, sidecar, relay };
}

export function labelsMatch(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** The Services that select the sluice Pods. */
export function podServices(objects: K8sObject[]): IService[] {
  const { deployment } = sluicePod(objects);
  const labels = deployment.spec?.template.metadata?.labels;
  return byKind<IService>(objects, 'Service').filter((s) => labelsMatch(s.spec?.selector, labels));
}

/** The Service clients reach: the one selecting the sluice Pods on sluice's public port. */
export function publicService(objects: K8sObject[]): { service: IService; targetPort: number } {
  const { sidecar } = sluicePod(objects);
  const publicPort = containerPort(sidecar, 'http');
  const found = podServices(objects).filter((s) => (s.spec?.ports ?? []).some((p) => resolvePort(sidecar, p.targetPort ?? p.port) === publicPort));
  if (found.length !== 1) throw new Error(`expected one Service on sluice's public port ${publicPort}, found ${found.length}`);
  return { service: found[0]!, targetPort: publicPort };
}

/** A container port given by name or number, as a number (must be declared when named). */
export function resolvePort(container: IContainer, port: number | string | undefined): number {
  if (typeof port === 'number') return port;
  if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
  const found = (container.ports ?? []).find((p) => p.name === port);
  if (!found) throw new Error(`container ${container.name} declares no port named ${String(port)}`);
  return found.containerPort;
}

export function containerPort(container: IContainer, name: string): number {
  return resolvePort(container, name);
}

/** The HTTP path and port number a probe calls. */
export function httpProbe(container: IContainer, probe: IProbe | undefined, which: string): { path: string; port: number } {
  if (!probe?.httpGet) throw new Error(`container ${container.name}: ${which} is not an httpGet probe`);
  return { path: probe.httpGet.path ?? '/', port: resolvePort(container, probe.httpGet.port) };
}

/** The env var of a container (undefined when absent). */
export function envVar(container: IContainer, name: string) {
  return (container.env ?? []).find((e) => e.name === name);
}

/** The ConfigMap mounted as a directory that holds the file SLUICE_CONFIG names. */
export function configMount(objects: K8sObject[], pod: IPodSpec, sidecar: IContainer) {
  const configPath = envVar(sidecar, 'SLUICE_CONFIG')?.value;
  if (!configPath) throw new Error('the sluice container sets no literal SLUICE_CONFIG');
  const mount = (sidecar.volumeMounts ?? []).find((m) => configPath.startsWith(m.mountPath.replace(/\/?$/, '/')));
  if (!mount) throw new Error(`no volumeMount of the sluice container contains ${configPath}`);
  const volume = (pod.volumes ?? []).find((v) => v.name === mount.name);
  if (!volume?.configMap?.name) throw new Error(`volume ${mount.name} (mounted at ${mount.mountPath}) is not a ConfigMap volume`);
  const configMap = one<IConfigMap>(objects, 'ConfigMap', volume.configMap.name);
  const fileName = configPath.slice(mount.mountPath.replace(/\/?$/, '/').length);
  // Files in the mounted directory: all keys, or the listed items.
  const files = new Map<string, string>();
  const data = configMap.data ?? {};
  if (volume.configMap.items?.length) {
    for (const item of volume.configMap.items) files.set(item.path, data[item.key] ?? '');
  } else {
    for (const [k, v] of Object.entries(data)) files.set(k, v);
  }
  return { configPath, mount, volume, configMap, fileName, files };
}

export function existsInRepo(path: string): boolean {
  return existsSync(join(ROOT, path));
}

/**
 * A value as Kubernetes expands it in `command`, `args` and `env`: `$(NAME)` becomes the variable
 * when `env` defines it (else stays as written), and `$$` is a literal `$`.
 */
export function expandK8s(value: string, env: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name?: string) => (name === undefined ? '$' : (env[name] ?? all)));
}

/**
 * The shutdown budget (docs/kubernetes.md, "Shutdown and the drain deadline"): what the grace
 * period must hold besides the hook's own waits, which the manifest states.
 */
export const SHUTDOWN_BUDGET = {
  /**
   * The hook waits this much longer than drainSeconds for sluice's answer: sluice looks for the
   * request every 0.5 s, closes what the deadline cut within a second, and the hook looks once a
   * second.
   */
  hookSlackSeconds: 5,
  /** sluice's exit on SIGTERM once its drain is over: close the store connection, flush the log. */
  sluiceExitSeconds: 5,
} as const;

export interface ShutdownHook {
  /** The relay's preStop command, as kubelet runs it in the relay container. */
  command: string[];
  /** The shared volume's name and where each container mounts it. */
  volume: string;
  relayPath: string;
  sluicePath: string;
  /** Seconds the hook waits before asking sluice to drain (for the endpoint removal to spread). */
  endpointWaitSeconds: number;
  /** Seconds the hook waits for sluice's answer, at most. */
  answerWaitSeconds: number;
  /** Seconds the relay takes to stop at most (its SHUTDOWN_TIMEOUT_SECONDS). */
  relayStopSeconds: number;
}

/**
 * The relay's preStop hook and the volume it shares with sluice: the directory sluice watches
 * (SLUICE_DRAIN_DIR) is where the relay's container sees the same volume, and the hook creates
 * `requestFile` there and waits for `doneFile` (the program's names, passed in).
 */
export function shutdownHook(_pod: IPodSpec, sidecar: IContainer, relay: IContainer, requestFile: string, doneFile: string): ShutdownHook {
  const dir = envVar(sidecar, 'SLUICE_DRAIN_DIR')?.value;
  if (!dir) throw new Error('the sluice container sets no literal SLUICE_DRAIN_DIR: nothing starts its drain before the relay stops');
  const sluiceMount = (sidecar.volumeMounts ?? []).find((m) => m.mountPath.replace(/\/$/, '') === dir.replace(/\/$/, ''));
  if (!sluiceMount) throw new Error(`no volumeMount of the sluice container is at SLUICE_DRAIN_DIR (${dir})`);
  const relayMount = (relay.volumeMounts ?? []).find((m) => m.name === sluiceMount.name);
  if (!relayMount) throw new Error(`the relay container does not mount volume ${sluiceMount.name} (SLUICE_DRAIN_DIR)`);
  const command = relay.lifecycle?.preStop?.exec?.command;
  if (command?.length !== 3 || command[0] !== '/bin/sh' || command[1] !== '-c') {
    throw new Error(`the relay's preStop hook is not ["/bin/sh", "-c", <script>]: ${JSON.stringify(relay.lifecycle?.preStop)}`);
  }
  const script = command[2]!;
  const at = relayMount.mountPath.replace(/\/$/, '');
  const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const wait = /^sleep (\d+);/.exec(script);
  if (!wait) throw new Error(`the preStop script does not begin with "sleep <seconds>;": ${script}`);
  if (!script.includes(`: > ${at}/${requestFile};`)) throw new Error(`the preStop script does not create ${at}/${requestFile}: ${script}`);
  const loop = new RegExp(`while \\[ ! -e ${esc(`${at}/${doneFile}`)} \\] && \\[ "\\$i" -lt (\\d+) \\]; do sleep 1; i=\\$\\(\\(i \\+ 1\\)\\); done;`).exec(script);
  if (!loop || !/; i=0; while /.test(script)) throw new Error(`the preStop script does not wait for ${at}/${doneFile} with a bounded loop: ${script}`);
  // Kubelet runs the hook on every stop of the relay, a restart in place too: sluice exits once the request is taken back.
  if (!script.endsWith(`done; rm -f ${at}/${requestFile}`)) throw new Error(`the preStop script does not end by removing ${at}/${requestFile}: ${script}`);
  const stop = envVar(relay, 'SHUTDOWN_TIMEOUT_SECONDS')?.value;
  if (stop === undefined || !/^\d+$/.test(stop)) throw new Error('the relay sets no literal SHUTDOWN_TIMEOUT_SECONDS: its stop has no bound to count');
  return {
    command,
    volume: sluiceMount.name,
    relayPath: relayMount.mountPath,
    sluicePath: sluiceMount.mountPath,
    endpointWaitSeconds: Number(wait[1]),
    answerWaitSeconds: Number(loop[1]),
    relayStopSeconds: Number(stop),
  };
}
