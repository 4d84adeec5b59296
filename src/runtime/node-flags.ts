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
 *
 * `--max-semi-space-size=16`: the young generation of Node 20 (two semi-spaces of 16 MiB). Node
 * 26's V8 lets it grow to two of 32 MiB, and with thousands of streams open that doubling was
 * most of what sluice's memory held above bare http-proxy's, for no throughput.
 */
const WITHOUT: Readonly<Record<string, string>> = {
  '--no-memory-reducer': 'a process that idles before its first traffic may serve about 10 % slower for good',
  '--expose-gc': 'memory a burst took is not given back while the process is idle',
  '--max-semi-space-size=16': 'on Node 26, about 30 MB more memory under load, for no throughput',
};

export const NODE_FLAGS: readonly string[] = Object.keys(WITHOUT);

/** A flag's name as V8 reads it: `_` is `-`, and the value after `=` aside. */
const flagName = (arg: string): string => arg.split('=', 1)[0]!.replace(/_/g, '-');

/** What this process was started with: its command line's Node flags and `NODE_OPTIONS` (where V8 takes some of them). */
function startFlags(): string[] {
  return [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
}

/**
 * The flags of NODE_FLAGS this process was not started with, each with what running without it
 * costs. A flag given with another value is given: the operator chose it.
 */
export function missingNodeFlags(execArgv: readonly string[] = startFlags()): Array<{ flag: string; without: string }> {
  const given = new Set(execArgv.map(flagName));
  return NODE_FLAGS.filter((f) => !given.has(flagName(f))).map((flag) => ({ flag, without: WITHOUT[flag]! }));
}
