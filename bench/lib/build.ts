/**
 * The JavaScript every measured process runs: compiled as the production image compiles it, never
 * under the tsx loader (its esbuild output wraps every closure in a `__name()` call).
 *
 * - `compile()`: this working tree's src/ and the bench's child scripts, with tsc, into bench/.build.
 * - `buildSide(spec)`: another version's src/ (a git ref, or the directory of a worktree) transpiled
 *   file by file into bench/.build/ab/<label>, for `npm run bench -- ab`. Inside the repository, so
 *   its imports of packages resolve to this checkout's node_modules.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { copyLua } from '../../scripts/copy-lua.js';

export const BENCH_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
export const ROOT_DIR = dirname(BENCH_DIR);
export const BUILD_DIR = join(BENCH_DIR, '.build');
/** Where runs write what they measured (ignored by git). */
export const RESULTS_DIR = join(BENCH_DIR, '.results');

/** Path of the compiled form of a file under bench/ (e.g. `servers/relay.ts`). */
export function built(benchFile: string): string {
  return join(BUILD_DIR, 'bench', benchFile.replace(/\.ts$/, '.js'));
}

/** This working tree's sluice entry point, compiled: what the image runs as `node dist/main.js`. */
export const MAIN_JS = join(BUILD_DIR, 'src', 'main.js');

function git(args: string[], cwd = ROOT_DIR): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Compiles src/ and the child scripts with tsc (bench/tsconfig.bench.json). Type errors (another
 * change in progress) are returned, not thrown, while the output exists.
 */
export function compile(): string {
  const tsc = join(ROOT_DIR, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', join(BENCH_DIR, 'tsconfig.bench.json')], { cwd: ROOT_DIR, encoding: 'utf8', timeout: 180_000, stdio: ['ignore', 'pipe', 'pipe'] });
    copyLua(join(BUILD_DIR, 'src'));
    copyPackageJson(BUILD_DIR, readFileSync(join(ROOT_DIR, 'package.json'), 'utf8'));
    return '';
  } catch (err) {
    if (!existsSync(MAIN_JS)) throw err;
    copyLua(join(BUILD_DIR, 'src'));
    copyPackageJson(BUILD_DIR, readFileSync(join(ROOT_DIR, 'package.json'), 'utf8'));
    const out = String((err as { stdout?: string }).stdout ?? '');
    return out
      .split('\n')
      .filter((l) => l.includes('error TS'))
      .slice(0, 5)
      .join('\n');
  }
}

/** sluice reads its version from the package.json above its src/ (src/runtime/version.ts), as the image's dist/ does. */
function copyPackageJson(outDir: string, text: string): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'package.json'), text);
}

/** The commit checked out in `dir`, with " + changes" when its working tree differs from it. */
export function describeTree(dir = ROOT_DIR): string {
  try {
    const head = git(['rev-parse', '--short', 'HEAD'], dir).trim();
    const dirty = git(['status', '--porcelain', '--untracked-files=no', '--', 'src'], dir).trim() !== '';
    return dirty ? `${head} + changes in src/` : head;
  } catch {
    return 'unknown';
  }
}

export interface SideBuild {
  /** What was asked for: a ref or a directory. */
  spec: string;
  /** The commit it resolved to, or the worktree and its state. */
  source: string;
  /** Its compiled `src/main.js`. */
  main: string;
}

function transpile(text: string): string {
  return ts.transpileModule(text, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
}

function sourcesIn(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => join(dir, f));
}

/**
 * `spec`'s src/ transpiled (types dropped, not checked) into bench/.build/ab/<label>/src, its Lua
 * scripts (the .lua files under src/, if any) copied as they are. `spec` is
 * a directory holding a src/ (this checkout `.`, or another worktree) or else a git ref of this
 * repository.
 */
export function buildSide(spec: string, label: string): SideBuild {
  const out = join(BUILD_DIR, 'ab', label);
  rmSync(out, { recursive: true, force: true });
  const write = (srcRelative: string, text: string): void => {
    const dest = join(out, srcRelative.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, transpile(text));
  };
  const copy = (srcRelative: string, text: string): void => {
    const dest = join(out, srcRelative);
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, text);
  };
  const dir = resolve(ROOT_DIR, spec);
  let source: string;
  if (existsSync(join(dir, 'src')) && statSync(join(dir, 'src')).isDirectory()) {
    for (const f of sourcesIn(join(dir, 'src'))) write(relative(dir, f), readFileSync(f, 'utf8'));
    copyLua(join(out, 'src'), join(dir, 'src'));
    copyPackageJson(out, readFileSync(join(dir, 'package.json'), 'utf8'));
    source = `${relative(ROOT_DIR, dir) || '.'} (worktree at ${describeTree(dir)})`;
  } else {
    let commit: string;
    try {
      commit = git(['rev-parse', '--verify', '--short', `${spec}^{commit}`]).trim();
    } catch {
      throw new Error(`${spec}: neither a directory holding src/ nor a git ref of this repository`);
    }
    for (const f of git(['ls-tree', '-r', '--name-only', commit, '--', 'src']).split('\n')) {
      if (f.endsWith('.ts') && !f.endsWith('.test.ts')) write(f, git(['show', `${commit}:${f}`]));
      else if (f.endsWith('.lua')) copy(f, git(['show', `${commit}:${f}`]));
    }
    copyPackageJson(out, git(['show', `${commit}:package.json`]));
    source = `${spec} (${commit})`;
  }
  const main = join(out, 'src', 'main.js');
  if (!existsSync(main)) throw new Error(`${spec}: no src/main.ts to start sluice from`);
  return { spec, source, main };
}
