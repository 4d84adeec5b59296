/** Shared by the benchmark's server processes. */

/** Runs `stop` on SIGTERM/SIGINT, then exits 0 (so `--cpu-prof` writes its profile); exits anyway after 3 s. */
export function onStopSignal(stop: () => Promise<unknown> | unknown): void {
  let stopping = false;
  const handler = (): void => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(0), 3000).unref();
    Promise.resolve()
      .then(stop)
      .catch(() => {})
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  // The runner owns us: when its stdin pipe closes (it exited or crashed), stop too.
  process.stdin.on('end', handler);
  process.stdin.on('error', handler);
  process.stdin.resume();
}

export function requireEnv(name: string): string {
  const v = process.env[name];
  if (!v) {
    process.stderr.write(`missing ${name}\n`);
    process.exit(2);
  }
  return v;
}
