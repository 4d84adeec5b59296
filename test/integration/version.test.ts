/**
 * An operator can tell which sluice runs: `sluice --version`, the start-up line and
 * `sluice_build_info` name the version, the commit and the Node, each from a process of its own.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { startChildSluice, type ChildSluice } from '../support/child-sluice.js';

const run = promisify(execFile);
const VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

/** The environment of this run without SLUICE_COMMIT, which the image sets and these tests choose. */
function envWithout(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.SLUICE_COMMIT;
  return env;
}

describe('sluice --version', () => {
  it('prints the version, the commit and the Node, and exits 0', async () => {
    const { stdout } = await run(process.execPath, ['bin/sluice.js', '--version'], { env: { ...envWithout(), SLUICE_COMMIT: COMMIT }, encoding: 'utf8' });
    expect(stdout).toBe(`sluice ${VERSION} (commit ${COMMIT}, Node ${process.version})\n`);
    expect((await run(process.execPath, ['bin/sluice.js', '-v'], { env: { ...envWithout(), SLUICE_COMMIT: COMMIT }, encoding: 'utf8' })).stdout).toBe(stdout);
  });

  it("names the checkout's HEAD when SLUICE_COMMIT is not set", async () => {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).trim();
    const { stdout } = await run(process.execPath, ['bin/sluice.js', '--version'], { env: envWithout(), encoding: 'utf8' });
    expect(stdout).toBe(`sluice ${VERSION} (commit ${head}, Node ${process.version})\n`);
  });
});

describe('a running sluice', () => {
  let relay: RelayStandin;
  let sluice: ChildSluice;
  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true });
    sluice = await startChildSluice({ relayUrl: relay.url, env: { SLUICE_COMMIT: COMMIT } });
  });
  afterAll(async () => {
    await sluice?.close();
    await relay?.close();
  });

  it('says in its start-up line which version, commit and Node it is', () => {
    expect(sluice.listening).toMatchObject({ version: VERSION, commit: COMMIT, node: process.version });
  });

  it('exports sluice_build_info{version,commit,node} 1 on /metrics', async () => {
    const text = await (await fetch(`${sluice.adminUrl}/metrics`)).text();
    expect(text).toContain('# TYPE sluice_build_info gauge');
    expect(text).toContain(`sluice_build_info{version="${VERSION}",commit="${COMMIT}",node="${process.version}"} 1\n`);
  });
});
