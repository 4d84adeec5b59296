/**
 * `npm start`: load and validate the config, start both listeners, and stop
 * cleanly on SIGTERM/SIGINT.
 */
import { createSluice } from './app.js';
import { loadConfig } from './config.js';
import { ConfigError } from './errors.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sluice: configuration error: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const sluice = createSluice({ config });
  await sluice.listen();
  const stop = (signal: string): void => {
    sluice.log.info({ signal }, 'shutting down');
    sluice.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`sluice: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
