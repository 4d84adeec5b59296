/**
 * The Dockerfile and .dockerignore, read without a Docker engine: multi-stage, small Node 26 (LTS)
 * base, the Node CI proves, production dependencies only in the runtime stage, compiled JS,
 * non-root numeric user, the commit it was built from.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { execForm, last, readDockerfile, stageEnv, type Stage } from './dockerfile.js';
import { existsInRepo, ROOT } from './k8s.js';
import { NODE_FLAGS } from '../../src/runtime/node-flags.js';

/** The image's Node line: 26, an LTS line until 2029-04-30 (Node 20 reached its end of life on 2026-04-30). */
const NODE_LTS = /^node:26(?:\.\d+){0,2}-(?:slim|alpine)(?:\d+(?:\.\d+)*)?(?:@sha256:[0-9a-f]{64})?$/;

function runs(stage: Stage): string[] {
  return stage.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);
}

describe('Dockerfile', () => {
  const stages = readDockerfile();
  const runtime = stages.at(-1)!;
  const build = stages.find((s) => s.name?.toLowerCase() === 'build');

  it('is multi-stage: a build stage, then a runtime stage, both on Node 26 (LTS) slim/alpine', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build, 'a stage named "build" (FROM ... AS build)').toBeDefined();
    expect(runtime).not.toBe(build);
    for (const s of stages) expect(s.from).toMatch(NODE_LTS);
  });

  it("runs on the Node line CI proves the suite on (.ci/run's pinned release)", () => {
    const pinned = /^NODE_IMAGE_VERSION=(\d+)\.\d+\.\d+$/m.exec(readFileSync(join(ROOT, '.ci/run'), 'utf8'));
    expect(pinned, '.ci/run pins NODE_IMAGE_VERSION=<major>.<minor>.<patch>').not.toBeNull();
    for (const s of stages) expect(/^node:(\d+)/.exec(s.from)![1]).toBe(pinned![1]);
  });

  it("installs under the project's npm configuration (.npmrc: no unreviewed install script) in both stages", () => {
    for (const s of [build!, runtime]) {
      const copies = s.instructions.filter((i) => i.op === 'COPY').map((i) => i.args);
      const installIndex = s.instructions.findIndex((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args));
      const npmrcIndex = s.instructions.findIndex((i) => i.op === 'COPY' && /(^|\s)\.npmrc(\s|$)/.test(i.args));
      expect(
        copies.some((c) => /\.npmrc/.test(c)),
        `${s.name}: COPY .npmrc`,
      ).toBe(true);
      expect(npmrcIndex).toBeLessThan(installIndex);
    }
  });

  it('carries the commit it was built from (build argument SLUICE_COMMIT), "unknown" without it', () => {
    const arg = runtime.instructions.find((i) => i.op === 'ARG' && /^SLUICE_COMMIT(=|$)/.test(i.args));
    expect(arg, 'ARG SLUICE_COMMIT in the runtime stage').toBeDefined();
    expect(stageEnv(runtime).SLUICE_COMMIT).toBe('unknown');
    const env = runtime.instructions.find((i) => i.op === 'ENV' && /\bSLUICE_COMMIT=/.test(i.args));
    expect(env!.line).toBeGreaterThan(arg!.line);
  });

  it('compiles TypeScript in the build stage with the full dependency set', () => {
    const r = runs(build!);
    expect(r.some((x) => /\bnpm ci\b/.test(x) && !/--omit=dev|--production/.test(x))).toBe(true);
    expect(r.some((x) => /\bnpm run build\b/.test(x))).toBe(true);
    // Only the sources the compiler needs.
    const copies = build!.instructions.filter((i) => i.op === 'COPY').map((i) => i.args);
    expect(copies.some((c) => /\bsrc\b/.test(c))).toBe(true);
    expect(copies.some((c) => /tsconfig\.build\.json/.test(c))).toBe(true);
    // `npm run build` copies the Lua scripts into dist/ with it.
    expect(copies.some((c) => /\bscripts\/copy-lua\.ts\b/.test(c))).toBe(true);
  });

  it('installs only production dependencies in the runtime stage and copies the compiled dist/', () => {
    const r = runs(runtime);
    expect(r.some((x) => /\bnpm ci\b.*--omit=dev/.test(x) || /\bnpm prune\b.*--omit=dev|--production/.test(x))).toBe(true);
    const copies = runtime.instructions.filter((i) => i.op === 'COPY').map((i) => i.args);
    expect(copies.some((c) => /--from=build\s+\S*dist\S*\s+\S*dist/.test(c))).toBe(true);
    // No sources, no TypeScript toolchain in the image.
    expect(copies.some((c) => /(^|\s)(\.\/)?src\b/.test(c) && !/--from=/.test(c))).toBe(false);
    expect(copies.some((c) => /^\.\s|\s\.\s+\.?\/?$/.test(c))).toBe(false); // no `COPY . .`
    expect(runtime.instructions.find((i) => i.op === 'ENV' && /NODE_ENV=production/.test(i.args))).toBeDefined();
  });

  it("ships better-sqlite3's native addon, built in the build stage with install scripts off for every other package", () => {
    // Without it, a relay on SQLite (SLUICE_RELAY_DB=sqlite:...) could not be read from the image.
    const r = runs(build!);
    expect(r.some((x) => /\bnpm ci\b.*--ignore-scripts/.test(x) && /\bnpm rebuild better-sqlite3\b/.test(x))).toBe(true);
    expect(r.some((x) => /apt-get install[^&]*\bg\+\+/.test(x) && /\bmake\b/.test(x) && /\bpython3\b/.test(x))).toBe(true);
    const copies = runtime.instructions.filter((i) => i.op === 'COPY').map((i) => i.args);
    expect(copies.some((c) => /--from=build\s+\S*node_modules\/better-sqlite3\/build\s+\S*node_modules\/better-sqlite3\/build/.test(c))).toBe(true);
    // Both stages on one base image: the addon's glibc and Node ABI match.
    expect(runtime.from).toBe(build!.from);
  });

  it('runs as a non-root numeric user', () => {
    const user = last(runtime, 'USER');
    expect(user, 'USER in the runtime stage').toBeDefined();
    const [uid, gid] = user!.args.split(':');
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid)).toBeGreaterThan(0);
    if (gid !== undefined) expect(gid).toMatch(/^\d+$/);
    // USER comes after every RUN, so nothing runs as root later.
    const lastRun = runtime.instructions.filter((i) => i.op === 'RUN').at(-1);
    if (lastRun) expect(user!.line).toBeGreaterThan(lastRun.line);
  });

  it('starts the compiled program with node and the Node flags sluice runs with, in exec form, from the WORKDIR the dist/ is copied to', () => {
    expect(last(runtime, 'ENTRYPOINT')).toBeUndefined();
    expect(execForm(last(runtime, 'CMD')?.args ?? '')).toEqual(['node', ...NODE_FLAGS, 'dist/main.js']);
    expect(last(runtime, 'WORKDIR')?.args).toBe('/app');
    // `npm run build` writes dist/main.js from src/main.ts.
    expect(existsInRepo('src/main.ts')).toBe(true);
    const buildConfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { compilerOptions?: { outDir?: string; rootDir?: string } };
    expect(buildConfig.compilerOptions?.outDir).toBe('dist');
    expect(buildConfig.compilerOptions?.rootDir).toBe('src');
  });

  it('declares the public and admin ports the manifests use', () => {
    const exposed = runtime.instructions.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/));
    expect(exposed).toEqual(expect.arrayContaining(['8080', '9090']));
  });
});

describe('.dockerignore', () => {
  const patterns = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.replace(/^\/+|\/+$/g, ''));

  it.each(['node_modules', '.git', 'test', 'demo', 'bench', 'dist'])('excludes %s', (entry) => {
    expect(patterns).toContain(entry);
  });

  it('does not exclude what the build needs', () => {
    for (const needed of ['src', 'scripts', 'scripts/copy-lua.ts', 'package.json', 'package-lock.json', '.npmrc', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(patterns).not.toContain(needed);
    }
    expect(patterns.some((p) => p.startsWith('!'))).toBe(false);
  });
});
