/**
 * npm's install-script policy: every dependency's install script is reviewed in package.json's
 * allowScripts (npm 11 warns on `npm ci` about any that is not, and a later npm skips it), and
 * .npmrc makes a new, unreviewed one fail the install. .ci/run checks the output of a real
 * `npm ci`; this checks the tree installed here.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './k8s.js';

const run = promisify(execFile);

describe('install scripts', () => {
  it('are each approved or denied in allowScripts: none is left for npm to warn about or skip', async () => {
    const { stdout } = await run('npm', ['install-scripts', 'ls', '--json'], { cwd: ROOT, encoding: 'utf8' });
    expect((JSON.parse(stdout) as { allowScripts: unknown[] }).allowScripts).toEqual([]);
  });

  it("run for better-sqlite3 alone (a native addon: reading a relay's SQLite file); the rest are denied", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    const approved = Object.entries(pkg.allowScripts ?? {})
      .filter(([, ok]) => ok)
      .map(([name]) => name);
    expect(approved).toEqual(['better-sqlite3']);
  });

  it('fail the install when a new one is not reviewed (.npmrc: strict-allow-scripts)', async () => {
    const { stdout } = await run('npm', ['config', 'get', 'strict-allow-scripts'], { cwd: ROOT, encoding: 'utf8' });
    expect(stdout.trim()).toBe('true');
    expect(readFileSync(join(ROOT, '.npmrc'), 'utf8')).toMatch(/^strict-allow-scripts=true$/m);
  });
});
