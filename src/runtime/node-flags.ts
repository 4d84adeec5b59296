/**
 * The Node flags sluice's process is started with wherever it runs for real: the image's CMD, the
 * Deployment's command, `npm start`, `npm run sluice`, `bin/sluice.js`, and every server the
 * benchmark starts. test/deploy checks the image and the Deployment, and
 * test/integration/admin.test.ts `npm start` and `bin/sluice.js`; `main.ts` warns when it was
 * started without them.
 * V8 takes these only on the command line (not from NODE_OPTIONS, not from `v8.setFlagsFromString`
 * once the heap exists).
 *
 * `--no-memory-reducer`: V8's memory reducer runs full garbage collections once a process falls
 * idle, to give memory back. On a sidecar that has started but has had no traffic yet (every new
 * Pod, until clients arrive) it left the request path measurably slower for the rest of the
 * process's life. A process that had traffic first was not affected, nor was bare http-proxy.
 * Without the reducer, what a burst took is not given back while the process idles; the idle
 * collection below gives it back. docs/performance.md has the measurements.
 *
 * `--expose-gc`: so that sluice can run that collection itself once traffic has come and gone,
 * when it is harmless (src/runtime/idle-gc.ts).
 */
const WITHOUT: Readonly<Record<string, string>> = {
  '--no-memory-reducer': 'a process that idles before its first traffic may serve about 10 % slower for good',
  '--expose-gc': 'memory a burst took is not given back while the process is idle',
};

export const NODE_FLAGS: readonly string[] = Object.keys(WITHOUT);

/**
 * The flags of NODE_FLAGS this process was not started with (V8 reads `_` in a flag name as `-`),
 * each with what running without it costs.
 */
export function missingNodeFlags(execArgv: readonly string[] = process.execArgv): Array<{ flag: string; without: string }> {
  const given = new Set(execArgv.map((a) => a.replace(/_/g, '-')));
  return NODE_FLAGS.filter((f) => !given.has(f)).map((flag) => ({ flag, without: WITHOUT[flag]! }));
}
