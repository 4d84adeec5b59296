/**
 * Hot reload of the config file. Kubernetes updates a mounted ConfigMap by
 * swapping a `..data` symlink in the directory, which a watch on the file
 * itself never sees; so the directory is watched, and a 1 s content poll
 * backs the watch up (inotify is not available everywhere). An invalid new
 * file is logged and counted, and the running config stays.
 *
 * Nothing here blocks the event loop: the file is read through the thread pool, only as a regular
 * file of at most 1 MiB (file.ts), and parsed in a worker bounded in time and memory (yaml.ts).
 * Anything else standing at the path (a FIFO, a device, a directory, a file too large) is a failed
 * reload, reported once for as long as it stays.
 */
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigFileError, readConfigBytes, readConfigBytesSync } from './file.js';
import { buildConfig, type Config } from './index.js';
import { parseConfigTextOffLoop } from './yaml.js';

export interface ConfigWatcherOptions {
  path: string;
  env: NodeJS.ProcessEnv;
  onReload: (config: Config) => void;
  onError: (err: Error) => void;
  pollMs?: number;
}

const digestOf = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

export class ConfigWatcher {
  /** The content last seen (its digest), or the refusal last reported (its identity). */
  private lastSeen: string | null = null;
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pending: NodeJS.Timeout | null = null;
  /** The look under way, and whether another was asked for meanwhile. */
  private looking: Promise<void> | null = null;
  private lookAgain = false;
  private stopped = false;

  constructor(private readonly opts: ConfigWatcherOptions) {}

  start(): void {
    this.stopped = false;
    // What start-up read (it refuses what is refused here): synchronous, bounded and never waiting on a FIFO.
    try {
      this.lastSeen = digestOf(readConfigBytesSync(this.opts.path));
    } catch (err) {
      this.lastSeen = err instanceof ConfigFileError ? err.identity : null;
    }
    try {
      this.watcher = watch(dirname(this.opts.path), { persistent: false }, () => this.schedule());
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = null;
      });
    } catch {
      // The poll below still catches changes.
    }
    this.timer = setInterval(() => void this.check(), this.opts.pollMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
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
      void this.check();
    }, 100);
    this.pending.unref();
  }

  /** Reads the file if its content changed and applies it when valid; one look at a time. */
  check(): Promise<void> {
    if (this.looking !== null) {
      this.lookAgain = true;
      return this.looking;
    }
    this.looking = this.look().finally(() => {
      this.looking = null;
      if (this.lookAgain && !this.stopped) {
        this.lookAgain = false;
        void this.check();
      }
    });
    return this.looking;
  }

  private async look(): Promise<void> {
    let bytes: Buffer;
    try {
      bytes = await readConfigBytes(this.opts.path);
    } catch (err) {
      const e = err as ConfigFileError;
      // A missing file mid-swap is not a change; the next event or poll sees the new one.
      if (e.missing || e.identity === this.lastSeen || this.stopped) return;
      this.lastSeen = e.identity;
      return this.opts.onError(e);
    }
    const digest = digestOf(bytes);
    if (digest === this.lastSeen) return;
    this.lastSeen = digest;
    let cfg: Config;
    try {
      cfg = buildConfig(await parseConfigTextOffLoop(this.opts.path, bytes.toString('utf8')), this.opts.env);
    } catch (err) {
      if (!this.stopped) this.opts.onError(err as Error);
      return;
    }
    if (!this.stopped) this.opts.onReload(cfg);
  }
}
