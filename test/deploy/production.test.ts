/**
 * The image runs the compiled program on the production dependencies alone (Dockerfile: `npm ci
 * --omit=dev`, then dist/ from the build stage). Checked here without a Docker engine: dist/ is
 * compiled into a directory of its own, beside package.json, bin/ and a node_modules that holds
 * only the packages `npm ci --omit=dev` installs (links into this checkout's), and the program is
 * started from there as the image starts it.
 */
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { copyLua } from '../../scripts/copy-lua.js';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';
import { ROOT } from './k8s.js';
import { eventually, GiveUp } from '../support/time.js';

const run = promisify(execFile);
const COMMIT = 'fedcba9876543210fedcba9876543210fedcba98';
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string> };
const VERSION = PACKAGE.version;

interface LockEntry {
  dev?: boolean;
}

/** The packages `npm ci --omit=dev` installs at the top of node_modules, from the lockfile. */
function productionPackages(): string[] {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  return Object.entries(lock.packages)
    .filter(([path, e]) => path.startsWith('node_modules/') && !path.slice('node_modules/'.length).includes('node_modules/') && !e.dev)
    .map(([path]) => path.slice('node_modules/'.length));
}

describe('the compiled program on the production dependencies alone', () => {
  let app: string;
  let relay: RelayStandin;

  beforeAll(async () => {
    app = mkdtempSync(join(tmpdir(), 'sluice-production-'));
    // What `npm run build` does (checked below), into this directory's dist/.
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(app, 'dist')]);
    copyLua(join(app, 'dist'));
    cpSync(join(ROOT, 'package.json'), join(app, 'package.json'));
    cpSync(join(ROOT, 'bin'), join(app, 'bin'), { recursive: true });
    for (const name of productionPackages()) {
      mkdirSync(dirname(join(app, 'node_modules', name)), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules', name), join(app, 'node_modules', name), 'dir');
    }
    relay = await startRelayStandin({ quiet: true });
  }, 60_000);
  afterAll(async () => {
    await relay?.close();
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('is built as `npm run build` builds it: tsc, then the Lua scripts copied beside the compiled store', () => {
    expect(PACKAGE.scripts.build).toBe('tsc -p tsconfig.build.json && tsx scripts/copy-lua.ts');
  });

  it('holds no TypeScript runner (tsx, esbuild): the image runs compiled JavaScript', () => {
    expect(productionPackages()).toEqual(expect.arrayContaining(['pino', 'ioredis', 'http-proxy', 'better-sqlite3']));
    expect(productionPackages().filter((p) => /^(tsx|esbuild|@esbuild\/|typescript$)/.test(p))).toEqual([]);
    expect(() => createRequire(join(app, 'dist/main.js')).resolve('tsx')).toThrow(/Cannot find module/);
  });

  it('answers sluice --version through bin/sluice.js, as `docker run <image> node bin/sluice.js --version` does', async () => {
    const { stdout } = await run(process.execPath, [join(app, 'bin/sluice.js'), '--version'], { cwd: app, env: { ...process.env, SLUICE_COMMIT: COMMIT }, encoding: 'utf8' });
    expect(stdout).toBe(`sluice ${VERSION} (commit ${COMMIT}, Node ${process.version})\n`);
  });

  it("starts with the image's command, names its build, serves, and exits 0 on SIGTERM", async () => {
    const child = spawn(process.execPath, [...NODE_FLAGS, 'dist/main.js'], {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        NODE_ENV: 'production',
        SLUICE_COMMIT: COMMIT,
        SLUICE_UPSTREAM_URL: relay.url,
        SLUICE_HOST: '127.0.0.1',
        SLUICE_ADMIN_HOST: '127.0.0.1',
        SLUICE_PORT: '0',
        SLUICE_ADMIN_PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (err = (err + b.toString('utf8')).slice(-4000)));
    try {
      const line = await eventually(
        () => {
          if (child.exitCode !== null) throw new GiveUp(`did not start (exit ${child.exitCode}): ${err}`);
          const found = out.split('\n').find((l) => l.includes('"sluice listening"'));
          if (found === undefined) throw new Error(`did not start: ${err}`);
          return found;
        },
        { timeoutMs: 20_000, intervalMs: 50, what: '"sluice listening"' },
      );
      const listening = JSON.parse(line) as { version: string; commit: string; node: string; port: number; adminPort: number };
      expect(listening).toMatchObject({ version: VERSION, commit: COMMIT, node: process.version });
      const admin = `http://127.0.0.1:${listening.adminPort}`;
      expect((await fetch(`${admin}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${admin}/metrics`)).text()).toContain(`sluice_build_info{version="${VERSION}",commit="${COMMIT}",node="${process.version}"} 1\n`);
      expect((await fetch(`http://127.0.0.1:${listening.port}/v1/models`)).status).toBe(401);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
