/**
 * Copies the Lua scripts under src/ (src/store/redis/lua/) to the same place under a compiled
 * tree, where the compiled store reads them (src/store/redis/scripts.ts): tsc copies only what it
 * compiles. `npm run build` runs it after tsc (`tsx scripts/copy-lua.ts [outDir]`, dist/ by
 * default); the image's build stage does so, test/deploy/production.test.ts and the benchmark's
 * builds call `copyLua`.
 */
import { cpSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** Every `.lua` file under `srcDir`, relative to it. */
export function luaFiles(srcDir: string): string[] {
  return readdirSync(srcDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.lua'));
}

/** Copies every `.lua` file under `srcDir` to the same relative path under `outDir`; returns them. */
export function copyLua(outDir: string, srcDir = join(ROOT, 'src')): string[] {
  const files = luaFiles(srcDir);
  for (const f of files) cpSync(join(srcDir, f), join(outDir, f));
  return files;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = resolve(process.argv[2] ?? join(ROOT, 'dist'));
  const files = copyLua(out);
  if (files.length === 0) throw new Error('no .lua file under src/: nothing to copy');
}
