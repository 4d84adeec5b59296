/**
 * What a scenario is to the runner (bench/run.ts), and the few helpers every report uses: medians,
 * figures, markdown tables and target verdicts.
 */

export interface Flag {
  type: 'string' | 'boolean';
  /** Repeatable (`--after-env A=1 --after-env B=2`). */
  multiple?: boolean;
  help: string;
}

export type FlagValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface Context {
  /** A smoke run: short rounds, figures meaningless. */
  quick: boolean;
  flags: FlagValues;
  /** Progress, to stderr. */
  log(line: string): void;
  /** A path for a file of this run under bench/.results (a raw profile, say). */
  artifact(name: string): string;
}

/** INFO: a figure reported beside the targets, with none of its own. */
export type Verdict = 'PASS' | 'FAIL' | 'INCONCLUSIVE' | 'INFO';

export interface Check {
  target: string;
  measured: string;
  verdict: Verdict;
}

export interface Result {
  /** Markdown: the tables and what they mean. */
  report: string;
  checks: Check[];
  /** Everything measured, for bench/.results/*.json. */
  data: unknown;
}

export interface Scenario {
  name: string;
  /** One line for `--list`. */
  summary: string;
  /** Runs in `npm run bench` without a scenario. */
  headline?: boolean;
  flags?: Record<string, Flag>;
  run(ctx: Context): Promise<Result>;
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A figure with `d` decimals ('n/a' when not a number). */
export function f(n: number, d = 2): string {
  return Number.isFinite(n) ? n.toFixed(d) : 'n/a';
}

/** Thousands separated, no decimals. */
export function int(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a';
}

/** `0.95 (0.91–1.02)`: a median with its lowest and highest round. */
export function withRange(xs: readonly number[], d = 2): string {
  return `${f(median(xs), d)} (${f(Math.min(...xs), d)}–${f(Math.max(...xs), d)})`;
}

/**
 * The median of paired per-round figures with its 95 % confidence interval: the order statistics a
 * sign test puts around it (distribution-free: the rounds' spread on this machine is neither
 * normal nor steady). Null below 6 values, where no such interval reaches 95 %.
 */
export function medianInterval(xs: readonly number[]): { median: number; lo: number; hi: number } | null {
  const n = xs.length;
  if (n < 6) return null;
  // 0.5 ** n underflows to 0 past 1074 values, and the walk below would never end.
  if (n > 1000) throw new Error(`medianInterval takes at most 1000 values, not ${n}`);
  const s = [...xs].sort((a, b) => a - b);
  // The largest j with P(Binomial(n, ½) ≤ j − 1) ≤ 2.5 %: the interval is the j-th value from each end.
  let j = 0;
  let below = 0; // P(X ≤ j − 1)
  let term = 0.5 ** n; // P(X = j)
  while (below + term <= 0.025) {
    below += term;
    term *= (n - j) / (j + 1);
    j++;
  }
  return { median: median(s), lo: s[j - 1]!, hi: s[n - j]! };
}

/** `0.95 (95 % CI 0.91–0.99)`, or withRange's form when there are too few rounds for an interval. */
export function withInterval(xs: readonly number[], d = 2): string {
  const m = medianInterval(xs);
  return m ? `${f(m.median, d)} (95 % CI ${f(m.lo, d)}–${f(m.hi, d)})` : withRange(xs, d);
}

/**
 * A target on paired rounds, judged on the 95 % interval of their median: PASS when all of it
 * meets `ok`, FAIL when none of it does, INCONCLUSIVE when it straddles the bound (or there are
 * too few rounds for an interval: then the median alone is judged).
 */
export function judged(target: string, xs: readonly number[], ok: (x: number) => boolean, d = 2, unit = ''): Check {
  const m = medianInterval(xs);
  const measured = `${withInterval(xs, d)}${unit}`;
  if (!m) return check(target, measured, ok(median(xs)));
  return check(target, measured, ok(m.lo) && ok(m.hi) ? true : !ok(m.lo) && !ok(m.hi) ? false : null);
}

/** A target's verdict: null when the noise of the machine exceeds what is judged. */
export function check(target: string, measured: string, ok: boolean | null): Check {
  return { target, measured, verdict: ok === null ? 'INCONCLUSIVE' : ok ? 'PASS' : 'FAIL' };
}

export function info(target: string, measured: string): Check {
  return { target, measured, verdict: 'INFO' };
}

/** A markdown table; the first column left-aligned, the others right-aligned. */
export function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return (
    [
      line(head),
      `|:---|${head
        .slice(1)
        .map(() => '---:')
        .join('|')}|`,
      ...rows.map(line),
    ].join('\n') + '\n'
  );
}

/** A flag as a number, or `fallback` when not given. */
export function numFlag(ctx: Context, name: string, fallback: number): number {
  const v = ctx.flags[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isFinite(n) || n < 0) throw new Error(`--${name} takes a number, not ${String(v)}`);
  return n;
}

export function strFlag(ctx: Context, name: string): string | undefined {
  const v = ctx.flags[name];
  return typeof v === 'string' ? v : undefined;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
