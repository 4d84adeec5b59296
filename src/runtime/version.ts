/**
 * Which sluice runs: its version (package.json), the commit it was built from and the Node it runs
 * on. `sluice --version`, the `sluice listening` start-up line and the `sluice_build_info` metric
 * all say the same, from here.
 *
 * The image has no .git: its Dockerfile sets SLUICE_COMMIT from the build argument of that name.
 * Elsewhere (a checkout) the commit is asked of git once, with a short timeout, and is "unknown"
 * when git cannot say. Read once per process, at start-up, never on the request path.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface BuildInfo {
  /** package.json's version, e.g. "0.2.0". */
  version: string;
  /** The commit built from (hex, as given), or "unknown". */
  commit: string;
  /** process.version, e.g. "v26.12.1". */
  node: string;
}

/** The repository root, or /app in the image: src/runtime/ and dist/runtime/ are both two levels down. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What is accepted as a commit: a hash, short or full (the value is logged and made a metric label). */
const COMMIT = /^[0-9a-f]{7,64}$/i;

/** How long git may take to name the commit (a checkout on a slow disk); it runs once. */
const GIT_TIMEOUT_MS = 2000;

let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  cached ??= { version: packageVersion(), commit: commitOf(process.env), node: process.version };
  return cached;
}

/** One line for people: `sluice 0.2.0 (commit 1a2b3c4d5e6f, Node v26.12.1)`. */
export function versionLine(info: BuildInfo = buildInfo()): string {
  return `sluice ${info.version} (commit ${info.commit}, Node ${info.node})`;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}

/** SLUICE_COMMIT when it holds a commit hash, else git's HEAD in the checkout, else "unknown". */
export function commitOf(env: NodeJS.ProcessEnv, root = ROOT): string {
  const given = env.SLUICE_COMMIT?.trim();
  if (given) return COMMIT.test(given) ? given.toLowerCase() : 'unknown';
  try {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      timeout: GIT_TIMEOUT_MS,
      stdio: ['ignore', 'pipe', 'ignore'],
      maxBuffer: 1024,
    }).trim();
    return COMMIT.test(head) ? head : 'unknown';
  } catch {
    return 'unknown'; // no git, not a checkout, or too slow
  }
}
