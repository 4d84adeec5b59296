/**
 * A small Dockerfile reader for the deploy tests (no Docker engine needed): stages, and per stage
 * the instructions in order, with line continuations joined and comments dropped.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './k8s.js';

export interface Instruction {
  op: string;
  args: string;
  line: number;
}

export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

export function readDockerfile(path = join(ROOT, 'Dockerfile')): Stage[] {
  const lines = readFileSync(path, 'utf8').split(/\r?\n/);
  const stages: Stage[] = [];
  let current = '';
  let startLine = 0;
  const flush = (): void => {
    const text = current.trim();
    current = '';
    if (!text) return;
    const m = /^(\S+)\s*(.*)$/s.exec(text)!;
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from) throw new Error(`Dockerfile line ${startLine}: cannot read FROM ${args}`);
      stages.push({ from: from[1]!, name: from[2], instructions: [] });
      return;
    }
    if (op === 'ARG' && stages.length === 0) return; // global build arguments
    const stage = stages.at(-1);
    if (!stage) throw new Error(`Dockerfile line ${startLine}: ${op} before the first FROM`);
    stage.instructions.push({ op, args, line: startLine });
  };
  lines.forEach((raw, i) => {
    const trimmed = raw.trim();
    if (current === '' && (trimmed === '' || trimmed.startsWith('#'))) return;
    if (current !== '' && trimmed.startsWith('#')) return; // comment inside a continuation
    if (current === '') startLine = i + 1;
    if (trimmed.endsWith('\\')) {
      current += trimmed.slice(0, -1) + ' ';
      return;
    }
    current += trimmed;
    flush();
  });
  flush();
  return stages;
}

/** The exec form (`["a", "b"]`) of CMD/ENTRYPOINT as an argv, or null for the shell form. */
export function execForm(args: string): string[] | null {
  if (!args.startsWith('[')) return null;
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) return null;
  return parsed as string[];
}

export function last(stage: Stage, op: string): Instruction | undefined {
  return stage.instructions.filter((i) => i.op === op).at(-1);
}

/**
 * ENV of a stage as key/value pairs (`ENV K=V K2=V2` and the legacy `ENV K V`), with `${NAME}` and
 * `$NAME` replaced as Docker does: by an earlier ENV, else by an ARG's default (the value an image
 * built without that --build-arg holds), else by nothing.
 */
export function stageEnv(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  const args: Record<string, string> = {};
  const expand = (v: string): string =>
    v.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_all, a?: string, b?: string) => env[(a ?? b)!] ?? args[(a ?? b)!] ?? '');
  for (const i of stage.instructions.filter((x) => x.op === 'ENV' || x.op === 'ARG')) {
    if (i.op === 'ARG') {
      const [name, ...dflt] = i.args.split('=');
      args[name!.trim()] = dflt.join('=');
      continue;
    }
    if (!i.args.includes('=')) {
      const [k, ...v] = i.args.split(/\s+/);
      env[k!] = expand(v.join(' '));
      continue;
    }
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
      const v = m[2]!;
      env[m[1]!] = expand(v.startsWith('"') ? (JSON.parse(v) as string) : v);
    }
  }
  return env;
}

/**
 * The argv a container runs under Kubernetes' rules: `command` replaces ENTRYPOINT (and drops CMD),
 * `args` replaces CMD.
 */
export function effectiveArgv(runtime: Stage, command: string[] | undefined, args: string[] | undefined): string[] {
  const entry = last(runtime, 'ENTRYPOINT');
  const cmd = last(runtime, 'CMD');
  const entryArgv = entry ? execForm(entry.args) : [];
  const cmdArgv = cmd ? execForm(cmd.args) : [];
  if (entryArgv === null || cmdArgv === null) throw new Error('Dockerfile ENTRYPOINT/CMD must use the exec form');
  if (command) return [...command, ...(args ?? [])];
  return [...entryArgv, ...(args ?? cmdArgv)];
}
