import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildInfo, commitOf, versionLine } from './version.js';

describe('buildInfo', () => {
  it("names package.json's version and the Node running it", () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(buildInfo()).toMatchObject({ version: pkg.version, node: process.version });
    expect(versionLine({ version: '1.2.3', commit: 'abcdef123456', node: 'v26.12.1' })).toBe('sluice 1.2.3 (commit abcdef123456, Node v26.12.1)');
  });
});

describe('commitOf', () => {
  const notACheckout = mkdtempSync(join(tmpdir(), 'sluice-version-'));
  afterAll(() => rmSync(notACheckout, { recursive: true, force: true }));

  it('takes SLUICE_COMMIT (the image) when it holds a commit hash, without asking git', () => {
    expect(commitOf({ SLUICE_COMMIT: '0123456789ABCDEF0123456789abcdef01234567' }, notACheckout)).toBe('0123456789abcdef0123456789abcdef01234567');
    expect(commitOf({ SLUICE_COMMIT: ' 1a2b3c4 \n' }, notACheckout)).toBe('1a2b3c4');
  });

  it('says "unknown" for a SLUICE_COMMIT that is not a commit hash: it becomes a log field and a metric label', () => {
    for (const bad of ['unknown', 'main', '1a2b3c', 'abc def0123', `${'a'.repeat(65)}`, '1a2b3c4"} 1\nsluice_fake 1']) {
      expect(commitOf({ SLUICE_COMMIT: bad }, notACheckout), bad).toBe('unknown');
    }
  });

  it('asks git for HEAD in a checkout, and says "unknown" where there is none', () => {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).trim();
    expect(commitOf({}, process.cwd())).toBe(head);
    expect(commitOf({ SLUICE_COMMIT: '' }, process.cwd())).toBe(head);
    expect(commitOf({}, notACheckout)).toBe('unknown');
  });
});
