#!/usr/bin/env -S node --no-memory-reducer --expose-gc --max-semi-space-size=16
// Runs the compiled CLI when built (container image), else the TypeScript source through tsx.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const compiled = `${root}dist/cli.js`;
if (existsSync(compiled)) {
  await import(pathToFileURL(compiled).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(`${root}src/cli.ts`).href);
}
