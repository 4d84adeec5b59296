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

/**
 * BENCH_LOOP_STATS=1: the server records its event-loop delay and GC pauses, and on SIGUSR2
 * writes them as one JSON line to stderr and starts again (bench/tools/pauses.ts reads it).
 */
if (process.env.BENCH_LOOP_STATS === '1') {
  const { monitorEventLoopDelay, PerformanceObserver, constants } = await import('node:perf_hooks');
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const kinds: Record<number, string> = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  };
  let gc: Record<string, { count: number; totalMs: number; maxMs: number }> = {};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = kinds[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
      const g = (gc[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
      g.count++;
      g.totalMs += e.duration;
      g.maxMs = Math.max(g.maxMs, e.duration);
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('SIGUSR2', () => {
    const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
    process.stderr.write(
      JSON.stringify({ loopStats: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), p999: ms(loop.percentile(99.9)), max: ms(loop.max), gc, heapMB: Math.round(process.memoryUsage().heapUsed / 1048576) } }) + '\n',
    );
    loop.reset();
    gc = {};
  });
}
