/**
 * A config reload: the new file's settings, but for those only a restart changes, put in force on
 * every running part a reload reaches (each a `ReloadTarget`, listed where sluice is wired,
 * src/app.ts), then logged and counted. A file the watcher refuses changes nothing.
 */
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/index.js';
import { publicConfig, type Config } from './index.js';
import { STARTUP_ONLY } from './schema.js';
import type { ConfigWatcherOptions } from './watch.js';

/** A running part a reload reaches: it takes the config now in force. */
export type ReloadTarget = (config: Config) => void;

export interface ReloadDeps {
  /** The config in force now. */
  running: () => Config;
  /** In order; the first makes the merged config the one in force. */
  targets: readonly ReloadTarget[];
  log: Logger;
  metrics: Metrics;
}

/** The watcher's callbacks: a valid file is applied to every target, a refused one only reported. */
export function reloader(d: ReloadDeps): Pick<ConfigWatcherOptions, 'onReload' | 'onError'> {
  return {
    onReload: (next) => {
      const { config, ignored } = applyReload(d.running(), next);
      if (ignored.length) d.log.warn({ settings: ignored }, 'config reload: these settings only change on restart; keeping the running values');
      for (const apply of d.targets) apply(config);
      d.metrics.configReloaded(true);
      d.log.info({ config: publicConfig(config) }, 'config reloaded');
    },
    onError: (err) => {
      d.metrics.configReloaded(false);
      d.log.error({ err: err.message }, 'config reload rejected; keeping the running config');
    },
  };
}

type Tree = Record<string, unknown>;

function at(c: Config, path: readonly string[]): unknown {
  let v: unknown = c;
  for (const k of path) v = (v as Tree)[k];
  return v;
}

/** `into` with the value at `path` taken from `from`, copying only the objects on the way. */
function keep<T extends object>(into: T, from: T, path: readonly string[]): T {
  const [k, ...rest] = path as [string, ...string[]];
  const a = into as Tree;
  const b = from as Tree;
  return { ...into, [k]: rest.length === 0 ? b[k] : keep(a[k] as Tree, b[k] as Tree, rest) };
}

/**
 * The config a reload puts in force: everything from the new file but the start-up-only
 * settings of the schema (src/config/schema.ts), which keep their running values; `ignored`
 * names those the file tried to change. A secret (the admin token) is kept without being named.
 */
export function applyReload(running: Config, next: Config): { config: Config; ignored: string[] } {
  let config = next;
  const ignored: string[] = [];
  for (const s of STARTUP_ONLY) {
    const path = s.configPath.split('.');
    if (!s.secret && JSON.stringify(at(running, path)) !== JSON.stringify(at(next, path))) ignored.push(s.path);
    config = keep(config, running, path);
  }
  return { config, ignored };
}
