/** A ConfigMap-style mount, as kubelet makes one: the file is a symlink through `..data`, swapped atomically. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class ConfigMapDir {
  readonly dir = mkdtempSync(join(tmpdir(), 'sluice-cm-'));
  private n = 0;
  constructor(content: string) {
    this.write(content);
    symlinkSync('..data/config.yaml', join(this.dir, 'config.yaml'));
  }
  get path(): string {
    return join(this.dir, 'config.yaml');
  }
  /** A new version holding `content`. */
  write(content: string | Buffer): void {
    this.swapIn((file) => writeFileSync(file, content));
  }
  /** A new version whose config.yaml is a FIFO (no writer). */
  writeFifo(): void {
    this.swapIn((file) => execFileSync('mkfifo', [file]));
  }
  /** A new version directory, `make` creating its config.yaml, then `..data` pointed at it in one rename. */
  private swapIn(make: (file: string) => void): void {
    const ts = `..2026_${++this.n}`;
    mkdirSync(join(this.dir, ts));
    make(join(this.dir, ts, 'config.yaml'));
    symlinkSync(ts, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
