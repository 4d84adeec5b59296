/**
 * The Lua scripts the Redis store runs (lua/*.lua), read once when this module loads, and the
 * commands ioredis defines for them on a connection made with SCRIPTS (EVALSHA, reloaded by
 * ioredis after a script flush). The build copies lua/ beside the compiled module (scripts/copy-lua.ts).
 */
import { readFileSync } from 'node:fs';
import type { RedisOptions, Result } from 'ioredis';
import { DAY_KEY_GRACE_MS } from '../types.js';

/**
 * How far replicas' clocks (and their reading of them) may differ for windows to stay exact: a
 * call is trimmed from a window only this long after it left it (consume.lua), and a window entry
 * stops being trusted as evidence this long before it leaves its window (replay.lua).
 */
export const EVIDENCE_MARGIN_MS = 2000;

/** The hash, beside a counter's key, of the members a replay has added to that counter. */
export const REPLAYED_SUFFIX = ':replayed';

/** A script from lua/, after a `local NAME = value` line for each constant it shares with TypeScript. */
function lua(file: string, constants: Readonly<Record<string, number>> = {}): string {
  let head = '';
  for (const [name, value] of Object.entries(constants)) head += `local ${name} = ${value}\n`;
  return head + readFileSync(new URL(`./lua/${file}`, import.meta.url), 'utf8');
}

export const SCRIPTS: NonNullable<RedisOptions['scripts']> = {
  sluiceConsume: { lua: lua('consume.lua', { DAY_KEY_GRACE_MS, EVIDENCE_MARGIN_MS }) },
  sluiceInspect: { lua: lua('inspect.lua'), readOnly: true },
  sluiceReplay: { lua: lua('replay.lua', { DAY_KEY_GRACE_MS, EVIDENCE_MARGIN_MS }) },
  sluiceCreateKey: { lua: lua('create-key.lua') },
  sluiceDeleteKey: { lua: lua('delete-key.lua') },
};

export type ScriptResult = Array<number | string>;

/**
 * The scripts, as the commands ioredis defines on a connection made with SCRIPTS, declared the
 * way ioredis's README asks (its RedisCommander augmented), for Redis and Cluster alike.
 */
declare module 'ioredis' {
  interface RedisCommander<Context> {
    sluiceConsume(numKeys: number, ...args: Array<string | number>): Result<ScriptResult, Context>;
    sluiceInspect(numKeys: number, ...args: Array<string | number>): Result<ScriptResult, Context>;
    sluiceReplay(numKeys: number, ...args: Array<string | number>): Result<ScriptResult, Context>;
    sluiceCreateKey(numKeys: number, ...args: Array<string | number>): Result<number, Context>;
    sluiceDeleteKey(numKeys: number, ...args: Array<string | number>): Result<string[] | null, Context>;
  }
}
