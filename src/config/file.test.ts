import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigFileError, MAX_CONFIG_FILE_BYTES, readConfigBytes, readConfigBytesSync } from './file.js';

const dir = mkdtempSync(join(tmpdir(), 'sluice-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, content: string | Buffer): string => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};

/** What each reader makes of `path`: the bytes' length, or the refusal. */
async function both(path: string): Promise<Array<number | { message: string; missing: boolean }>> {
  const out: Array<number | { message: string; missing: boolean }> = [];
  for (const read of [async () => readConfigBytesSync(path), () => readConfigBytes(path)]) {
    try {
      out.push((await read()).length);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigFileError);
      out.push({ message: (err as Error).message, missing: (err as ConfigFileError).missing });
    }
  }
  return out;
}

describe('reading the config file', () => {
  it('reads a regular file of up to 1 MiB, through a symlink, and refuses one byte more', async () => {
    const edge = file('edge.yaml', Buffer.alloc(MAX_CONFIG_FILE_BYTES, 0x20));
    symlinkSync(edge, join(dir, 'link.yaml'));
    expect(await both(join(dir, 'link.yaml'))).toEqual([MAX_CONFIG_FILE_BYTES, MAX_CONFIG_FILE_BYTES]);
    const over = file('over.yaml', Buffer.alloc(MAX_CONFIG_FILE_BYTES + 1, 0x20));
    const refusal = { message: `config file ${over} is 1048577 bytes, over the 1048576 bytes (1 MiB) a config file may hold`, missing: false };
    expect(await both(over)).toEqual([refusal, refusal]);
  });

  it('refuses a FIFO without waiting for a writer, a directory and a device, naming what each is', async () => {
    const fifo = join(dir, 'fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    for (const [path, kind] of [
      [fifo, 'a FIFO'],
      [dir, 'a directory'],
      ['/dev/zero', 'a character device'],
    ] as const) {
      const refusal = { message: `config file ${path} is ${kind}, not a regular file; sluice reads only a regular file of at most 1 MiB`, missing: false };
      expect(await both(path)).toEqual([refusal, refusal]);
    }
  });

  it('reads a file whose size says nothing (a /proc file) to its end', async () => {
    // /proc files are regular files of size 0.
    expect((await both('/proc/self/status')).every((n) => typeof n === 'number' && n > 0)).toBe(true);
  });

  it('says a missing file is missing (a symlink swap under way), and gives the same refusal the same identity', async () => {
    const [sync] = await both(join(dir, 'none.yaml'));
    expect(sync).toMatchObject({ message: expect.stringMatching(/^cannot read config file .*ENOENT/) as string, missing: true });
    const over = join(dir, 'over.yaml');
    const identities: string[] = [];
    for (let i = 0; i < 2; i++) {
      try {
        await readConfigBytes(over);
      } catch (err) {
        identities.push((err as ConfigFileError).identity);
      }
    }
    expect(identities[0]).toBe(identities[1]);
    file('over.yaml', Buffer.alloc(MAX_CONFIG_FILE_BYTES + 2, 0x20));
    await expect(readConfigBytes(over)).rejects.toSatisfy((err: ConfigFileError) => err.identity !== identities[0]);
  });
});
