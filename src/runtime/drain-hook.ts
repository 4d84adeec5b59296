/**
 * The Pod's shutdown hook, sluice's side. In a Pod the relay stops before sluice (a native sidecar
 * stops after the main containers), so the drain that lets streams finish must run while the relay
 * still serves them: inside the relay container's preStop hook. That hook creates `drain` in a
 * directory only the Pod's two containers mount (an emptyDir) and waits for `drained`; this
 * watches for `drain`, runs sluice's drain (bounded by drainSeconds), and then writes `drained`.
 *
 * Kubelet runs the hook whenever it stops the relay's container, not only when the Pod goes: a
 * relay that fails its liveness probe is restarted in the same Pod, after the hook. The hook
 * removes `drain` as it returns; sluice, drained, then exits (`released`), and kubelet starts a
 * fresh one if the Pod stays. A drained sluice that stayed would keep the Pod out of service
 * for good once the relay came back.
 *
 * No network request can start a drain: only what can write into that directory can, which is
 * the Pod's own containers. A drain endpoint would be a way for anything that reaches it to take a
 * replica out of service, the relay's own URL fetches on a client's behalf included
 * (docs/kubernetes.md, Shutdown).
 */
import { accessSync, constants, existsSync, rmSync, statSync } from 'node:fs';
import { access, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError } from '../config/error.js';

/** Created by the relay's preStop hook: start draining. */
export const DRAIN_REQUEST_FILE = 'drain';
/** Written by sluice once its drain is over: nothing is in flight toward the relay any more. */
export const DRAIN_DONE_FILE = 'drained';
/** How often the directory is looked at: two stat calls a second, and the hook sleeps 5 s before asking anyway. */
const DRAIN_POLL_MS = 500;

export interface DrainHookOptions {
  /** The directory shared with the relay's container (`drainDir`). */
  dir: string;
  /** sluice's drain: resolves once nothing is open (or what was open at the deadline was cut). */
  drain: () => Promise<{ forced: number }>;
  log: Logger;
  /** The hook returned after this drain (it removed `drain`): sluice has nothing more to do and exits. */
  released: () => void;
  pollMs?: number;
}

/** Throws ConfigError unless `dir` is a directory this process can read and write. */
function checkDirectory(dir: string): void {
  try {
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
    accessSync(dir, constants.R_OK | constants.W_OK | constants.X_OK);
  } catch (err) {
    throw new ConfigError(
      `drainDir (SLUICE_DRAIN_DIR) ${JSON.stringify(dir)} must be a directory sluice can read and write (the volume shared with the relay's container): ${(err as Error).message}`,
    );
  }
}

export class DrainHook {
  private timer: NodeJS.Timeout | null = null;
  private requested = false;
  private readonly requestPath: string;
  private readonly donePath: string;

  constructor(private readonly opts: DrainHookOptions) {
    checkDirectory(opts.dir);
    this.requestPath = join(opts.dir, DRAIN_REQUEST_FILE);
    this.donePath = join(opts.dir, DRAIN_DONE_FILE);
  }

  /** Looks for a request now and then every `pollMs`; an answer left from an earlier run, with no request, is removed first. */
  start(): void {
    // The volume outlives a restarted container: an old answer must not let a later hook return before this drain.
    if (!existsSync(this.requestPath)) rmSync(this.donePath, { force: true });
    this.timer = setInterval(() => void this.check(), this.opts.pollMs ?? DRAIN_POLL_MS);
    this.timer.unref();
    void this.check();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private async check(): Promise<void> {
    if (this.requested) return;
    try {
      await access(this.requestPath);
    } catch {
      return;
    }
    if (this.requested) return;
    this.requested = true;
    this.stop();
    const { log } = this.opts;
    log.info({ dir: this.opts.dir }, "drain requested by the Pod's shutdown hook");
    const forced = await this.opts.drain().then(
      (r) => r.forced,
      (err: unknown) => {
        log.error({ err: String(err) }, 'drain failed');
        return null;
      },
    );
    try {
      // Replaced, never written through: a link planted under that name would not redirect the write.
      await rm(this.donePath, { force: true });
      await writeFile(this.donePath, `${JSON.stringify({ forced })}\n`, { flag: 'wx' });
      log.info({ forced }, "drained: the Pod's shutdown hook may let the relay stop");
    } catch (err) {
      log.error({ err: (err as Error).message, dir: this.opts.dir }, 'drained, but cannot tell the shutdown hook: it waits out its own bound');
    }
    this.timer = setInterval(() => void this.checkReturned(), this.opts.pollMs ?? DRAIN_POLL_MS);
    this.timer.unref();
  }

  /** Once the hook has removed its request, it has returned: the relay stops, or restarts in this Pod. */
  private async checkReturned(): Promise<void> {
    if (this.timer === null) return;
    try {
      await access(this.requestPath);
      return;
    } catch {
      // Gone: the hook returned.
    }
    if (this.timer === null) return;
    this.stop();
    this.opts.log.info("the Pod's shutdown hook returned: exiting, so that a relay restarted in this Pod finds a fresh sluice");
    this.opts.released();
  }
}
