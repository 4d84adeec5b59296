/**
 * Hot reload of the config file. Kubernetes updates a mounted ConfigMap by
 * swapping a `..data` symlink in the directory, which a watch on the file
 * itself never sees; so the directory is watched, and a 1 s content poll
 * backs the watch up (inotify is not available everywhere). An invalid new
 * file is logged and counted, and the running config stays.
 */
import { createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { buildConfig, readConfigFile, type Config } from './index.js';

export interface ConfigWatcherOptions {
  path: string;
  env: NodeJS.ProcessEnv;
  onReload: (config: Config) => void;
  onError: (err: Error) => void;
  pollMs?: number;
}

export class ConfigWatcher {
  private lastDigest: string | null = null;
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pending: NodeJS.Timeout | null = null;

  constructor(private readonly opts: ConfigWatcherOptions) {}

  start(): void {
    this.lastDigest = this.digest();
    try {
      this.watcher = watch(dirname(this.opts.path), { persistent: false }, () => this.schedule());
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = null;
      });
    } catch {
      // The poll below still catches changes.
    }
    this.timer = setInterval(() => this.check(), this.opts.pollMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    this.watcher?.close();
    this.watcher = null;
    if (this.timer) clearInterval(this.timer);
    if (this.pending) clearTimeout(this.pending);
    this.timer = this.pending = null;
  }

  private schedule(): void {
    // Editors and kubelet write in several steps; settle first.
    if (this.pending) clearTimeout(this.pending);
    this.pending = setTimeout(() => {
      this.pending = null;
      this.check();
    }, 100);
    this.pending.unref();
  }

  private digest(): string | null {
    try {
      return createHash('sha256').update(readFileSync(this.opts.path)).digest('hex');
    } catch {
      return null;
    }
  }

  /** Reads the file if its content changed and applies it when valid. */
  check(): void {
    const d = this.digest();
    // A missing file mid-swap is not a change; the next event or poll sees the new one.
    if (d === null || d === this.lastDigest) return;
    this.lastDigest = d;
    let cfg: Config;
    try {
      cfg = buildConfig(readConfigFile(this.opts.path), this.opts.env);
    } catch (err) {
      this.opts.onError(err as Error);
      return;
    }
    this.opts.onReload(cfg);
  }
}
