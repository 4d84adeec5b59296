/**
 * `npm start`: load and validate the config, start both listeners, reload the
 * config file when it changes, drain when the Pod's shutdown hook asks (drainDir) and exit once
 * it returns, and drain on SIGTERM/SIGINT (at once, if that drain is over already) before exiting 0.
 */
import { createSluice } from './app.js';
import { DrainHook } from './runtime/drain-hook.js';
import { loadConfig, type Config } from './config/index.js';
import { ConfigError } from './config/error.js';
import { missingNodeFlags } from './runtime/node-flags.js';

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sluice: configuration error: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const file = process.env.SLUICE_CONFIG;
  let sluice: ReturnType<typeof createSluice>;
  let hook: DrainHook | null = null;
  try {
    sluice = createSluice({ config, configFile: file ? { path: file, env: process.env } : undefined });
    const s = sluice;
    if (config.drainDir !== null) hook = new DrainHook({ dir: config.drainDir, drain: () => s.drain(), log: s.log, released: () => stop({ reason: 'drain hook returned' }) });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sluice: configuration error: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  await sluice.listen();
  hook?.start();
  const missing = missingNodeFlags();
  if (missing.length) sluice.log.warn({ missing }, 'started without the Node flags sluice is meant to run with (README, Running it)');
  let stopping = false;
  /** Drains (at once, if a drain is over already), closes, and exits 0. */
  function stop(why: { signal: string } | { reason: string }): void {
    if (stopping) return;
    stopping = true;
    sluice.log.info(why, 'shutting down');
    sluice
      .drain()
      .then(() => sluice.close())
      .then(
        () => sluice.log.flush(() => process.exit(0)),
        (err: unknown) => {
          sluice.log.error({ err: String(err) }, 'shutdown failed');
          sluice.log.flush(() => process.exit(1));
        },
      );
  }
  process.once('SIGTERM', () => stop({ signal: 'SIGTERM' }));
  process.once('SIGINT', () => stop({ signal: 'SIGINT' }));
}

main().catch((err: unknown) => {
  process.stderr.write(`sluice: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
