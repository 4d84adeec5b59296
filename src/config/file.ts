/**
 * The config file's bytes, read only as a regular file of at most MAX_CONFIG_FILE_BYTES. Whatever
 * stands at the path (a ConfigMap's `..data` symlink can be made to point anywhere) is opened
 * without blocking and judged by what the open descriptor is: opening a FIFO for reading waits for
 * a writer (the whole process froze in `readFileSync`), a device never ends, and a large file takes
 * the event loop for seconds. Start-up reads synchronously (nothing is served yet), reloads
 * through the thread pool; both refuse the same files with the same messages.
 */
import { constants, fstatSync, openSync, closeSync, readSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { ConfigError } from './error.js';

/** The largest config file read: a Kubernetes ConfigMap holds at most 1 MiB, and real ones a few KB. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

// O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer; it
// changes nothing for a regular file.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/** Why a config file was not read; `missing` is the moment of a symlink swap, not a fault. */
export class ConfigFileError extends ConfigError {
  constructor(
    message: string,
    /** The path does not resolve to anything (yet): a reload waits for the next look. */
    readonly missing: boolean,
    /** What was refused (the file's identity, or the error's code): the same refusal is reported once. */
    readonly identity: string,
  ) {
    super(message);
  }
}

const MISSING = new Set(['ENOENT', 'ENOTDIR']);

function unreadable(path: string, err: unknown): ConfigFileError {
  const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
  return new ConfigFileError(`cannot read config file ${path}: ${(err as Error).message}`, MISSING.has(code), `error:${code}`);
}

function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isDirectory()) return 'a directory';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

const identityOf = (st: Stats): string => `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;

function tooLarge(path: string, size: number | string, identity: string): ConfigFileError {
  return new ConfigFileError(`config file ${path} is ${size} bytes, over the ${MAX_CONFIG_FILE_BYTES} bytes (1 MiB) a config file may hold`, false, `large:${identity}`);
}

/** Refuses what the descriptor is, if it is not a regular file within the bound. */
function judge(path: string, st: Stats): void {
  if (!st.isFile()) {
    throw new ConfigFileError(`config file ${path} is ${kindOf(st)}, not a regular file; sluice reads only a regular file of at most 1 MiB`, false, `kind:${identityOf(st)}`);
  }
  if (st.size > MAX_CONFIG_FILE_BYTES) throw tooLarge(path, st.size, identityOf(st));
}

/** Reads are made this large; a file is read until its end or one read past the bound. */
const CHUNK = 64 * 1024;

/** Gathers one read's bytes; refuses the file once they go past the bound (a file that grew after it was judged, or whose size says nothing, such as a /proc file). */
class Gathered {
  private readonly parts: Buffer[] = [];
  private total = 0;
  constructor(
    private readonly path: string,
    private readonly st: Stats,
  ) {}
  add(chunk: Buffer, n: number): void {
    this.parts.push(chunk.subarray(0, n));
    this.total += n;
    if (this.total > MAX_CONFIG_FILE_BYTES) throw tooLarge(this.path, `more than ${MAX_CONFIG_FILE_BYTES}`, identityOf(this.st));
  }
  bytes(): Buffer {
    return Buffer.concat(this.parts, this.total);
  }
}

/** At start-up: the file's bytes, or a ConfigFileError (exit 78). */
export function readConfigBytesSync(path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (err) {
    throw unreadable(path, err);
  }
  try {
    const st = fstatSync(fd);
    judge(path, st);
    const out = new Gathered(path, st);
    for (;;) {
      const chunk = Buffer.allocUnsafe(CHUNK);
      const n = readSync(fd, chunk, 0, CHUNK, null);
      if (n === 0) return out.bytes();
      out.add(chunk, n);
    }
  } catch (err) {
    throw err instanceof ConfigFileError ? err : unreadable(path, err);
  } finally {
    closeSync(fd);
  }
}

/** On a reload: the same, through the thread pool, never blocking the event loop. */
export async function readConfigBytes(path: string): Promise<Buffer> {
  let fh: FileHandle;
  try {
    fh = await open(path, OPEN_FLAGS);
  } catch (err) {
    throw unreadable(path, err);
  }
  try {
    const st = await fh.stat();
    judge(path, st);
    const out = new Gathered(path, st);
    for (;;) {
      const chunk = Buffer.allocUnsafe(CHUNK);
      const { bytesRead } = await fh.read(chunk, 0, CHUNK, null);
      if (bytesRead === 0) return out.bytes();
      out.add(chunk, bytesRead);
    }
  } catch (err) {
    throw err instanceof ConfigFileError ? err : unreadable(path, err);
  } finally {
    await fh.close();
  }
}
