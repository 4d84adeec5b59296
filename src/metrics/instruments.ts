/**
 * Counters, gauges and histograms for the request path. prom-client's own instruments hash the
 * label object on every call, child or not, and the request path makes several such calls per
 * request; these resolve a label set to a cell once and then cost an addition. They render through prom-client's Registry
 * (which accepts any object with a `name` and a `get()`), so /metrics keeps one format and the
 * process metrics stay prom-client's.
 */

type LabelValues<L extends string> = Readonly<Record<L, string>>;

/** What prom-client's Registry reads from a metric. */
export interface MetricSnapshot {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  aggregator: 'sum';
  values: Array<{ value: number; labels: Record<string, string | number>; metricName?: string }>;
}

interface Described {
  readonly name: string;
  readonly help: string;
}

/** Cells by label set, keyed by the values, each prefixed with its length (no two sets share a key). */
class Cells<L extends string, C> {
  private readonly byKey = new Map<string, { labels: LabelValues<L>; cell: C }>();

  constructor(
    private readonly labelNames: readonly L[],
    private readonly make: () => C,
  ) {}

  get(labels: LabelValues<L>): C {
    let key = '';
    for (const n of this.labelNames) {
      const v = labels[n];
      if (typeof v !== 'string') throw new TypeError(`label "${n}" is missing`);
      key += `${v.length}:${v}`;
    }
    let e = this.byKey.get(key);
    if (e === undefined) {
      const copy = {} as Record<L, string>;
      for (const n of this.labelNames) copy[n] = labels[n];
      this.byKey.set(key, (e = { labels: copy, cell: this.make() }));
    }
    return e.cell;
  }

  entries(): IterableIterator<{ labels: LabelValues<L>; cell: C }> {
    return this.byKey.values();
  }
}

export interface CounterCell {
  value: number;
}

export class Counter<L extends string = never> implements Described {
  private readonly cells: Cells<L, CounterCell>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[] = [],
  ) {
    this.cells = new Cells(labelNames, () => ({ value: 0 }));
  }

  /** The cell of one label set: keep it where the same labels recur, and add to its `value`. */
  cell(labels: LabelValues<L>): CounterCell {
    return this.cells.get(labels);
  }

  inc(labels: LabelValues<L>, by = 1): void {
    this.cells.get(labels).value += by;
  }

  get(): MetricSnapshot {
    const values = [...this.cells.entries()].map((e) => ({ value: e.cell.value, labels: { ...e.labels } }));
    return { name: this.name, help: this.help, type: 'counter', aggregator: 'sum', values };
  }
}

export class Gauge implements Described {
  value = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    /** Reads the value when metrics are collected, for a figure kept elsewhere (then `value` is unused). */
    private readonly read?: () => number,
  ) {}

  inc(): void {
    this.value++;
  }

  dec(): void {
    this.value--;
  }

  get(): MetricSnapshot {
    const value = this.read === undefined ? this.value : this.read();
    return { name: this.name, help: this.help, type: 'gauge', aggregator: 'sum', values: [{ value, labels: {} }] };
  }
}

/** One label set's buckets; `observe` is the whole hot-path cost. */
export class HistogramCell {
  /** Non-cumulative: counts[i] holds observations in (bounds[i-1], bounds[i]]; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class Histogram<L extends string = never> implements Described {
  private readonly cells: Cells<L, HistogramCell>;
  private readonly bounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
    buckets: readonly number[],
  ) {
    this.bounds = [...buckets].sort((a, b) => a - b);
    this.cells = new Cells(labelNames, () => new HistogramCell(this.bounds));
  }

  cell(labels: LabelValues<L>): HistogramCell {
    return this.cells.get(labels);
  }

  get(): MetricSnapshot {
    const values: MetricSnapshot['values'] = [];
    for (const { labels, cell } of this.cells.entries()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += cell.counts[i]!;
        const le = i < this.bounds.length ? this.bounds[i]! : '+Inf';
        values.push({ value: cumulative, labels: { le, ...labels }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: cell.sum, labels: { ...labels }, metricName: `${this.name}_sum` });
      values.push({ value: cell.count, labels: { ...labels }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }
}
