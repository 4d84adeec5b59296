/**
 * A git ref's src/, transpiled file by file (types dropped, no type check) into `outDir/src`, so a
 * tool can run an earlier version of sluice's code beside the working tree's. `outDir` must lie
 * inside the repository, for the copy's imports of packages to resolve to node_modules.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { ROOT_DIR } from './proc.js';

export function transpileSrcAt(ref: string, outDir: string): void {
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT_DIR, encoding: 'utf8', maxBuffer: 64 << 20 });
  for (const f of git('ls-tree', '-r', '--name-only', ref, 'src').split('\n').filter((n) => n.endsWith('.ts') && !n.endsWith('.test.ts'))) {
    const out = ts.transpileModule(git('show', `${ref}:${f}`), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    const dest = join(outDir, f.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, out.outputText);
  }
}

/** `ref`'s src/ transpiled into a scratch folder (removed on exit): its path. */
export function srcAt(ref: string): string {
  const dir = join(ROOT_DIR, 'bench', '.scratch', `ref-${process.pid}`);
  transpileSrcAt(ref, dir);
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'src');
}
