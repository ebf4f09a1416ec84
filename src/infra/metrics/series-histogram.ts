/**
 * A histogram for the hot path. prom-client's `observe` checks and hashes the label object on every
 * call, and a key string built per call costs an allocation and a hash of its own; measured on cached
 * reads answered by the fast path, that was most of what metrics cost. Here the label values (one to
 * three, in the order of `labelNames`) select the series through nested Maps keyed by the values
 * themselves, so an observation allocates nothing once its series exists: a few lookups of strings
 * and numbers the caller already holds, and a few additions. Labels are checked once per series. The
 * registry formats it at scrape time like its own histograms (the same `get()` shape), and the
 * cluster aggregator sums it like them.
 */
import type { Histogram } from 'prom-client';

type Labels = Record<string, string>;
type Exported = Awaited<ReturnType<Histogram['get']>>;
type LabelValue = string | number;

interface Series {
  labels: Labels;
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  counts: number[];
  sum: number;
  count: number;
}

/** One level of the tree per label: the last level holds the series. */
type Level = Map<LabelValue, Level | Series>;

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export class SeriesHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  readonly #labelNames: readonly string[];
  #root: Level = new Map();
  /** Every series, in the order first observed (what a scrape prints). */
  #series: Series[] = [];

  /** `buckets` are the upper bounds in ascending order, without +Inf; one to three `labelNames`. */
  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
    labelNames: readonly string[],
  ) {
    if (labelNames.length < 1 || labelNames.length > 3) throw new RangeError('one to three label names');
    for (const label of labelNames) if (!LABEL_NAME.test(label) || label === 'le') throw new RangeError(`invalid label name ${label}`);
    this.#bounds = [...buckets];
    this.#labelNames = [...labelNames];
  }

  /** Counts `value` in the series of the label values `a`, `b`, `c` (as many as there are label names). */
  observe(value: number, a: LabelValue, b?: LabelValue, c?: LabelValue): void {
    const depth = this.#labelNames.length;
    let level = this.#root;
    let node = level.get(a);
    if (depth > 1) {
      level = (node as Level | undefined) ?? this.#branch(level, a);
      node = level.get(b!);
      if (depth > 2) {
        level = (node as Level | undefined) ?? this.#branch(level, b!);
        node = level.get(c!);
      }
    }
    const series = (node as Series | undefined) ?? this.#add(level, depth === 1 ? a : depth === 2 ? b! : c!, [a, b, c]);
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i += 1;
    series.counts[i]! += 1;
    series.sum += value;
    series.count += 1;
  }

  /** What the registry formats: cumulative buckets, sum and count per series. */
  async get(): Promise<Exported> {
    const values: Exported['values'] = [];
    for (const series of this.#series) {
      let cumulative = 0;
      series.counts.forEach((n, i) => {
        cumulative += n;
        values.push({ labels: { le: this.#bounds[i] ?? '+Inf', ...series.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values } as unknown as Exported;
  }

  /** Forgets every series (the registry's `resetMetrics`). */
  reset(): void {
    this.#root = new Map();
    this.#series = [];
  }

  #branch(level: Level, value: LabelValue): Level {
    const next: Level = new Map();
    level.set(value, next);
    return next;
  }

  #add(level: Level, key: LabelValue, values: Array<LabelValue | undefined>): Series {
    const labels: Labels = {};
    this.#labelNames.forEach((label, i) => (labels[label] = String(values[i])));
    const series: Series = { labels, counts: new Array<number>(this.#bounds.length + 1).fill(0), sum: 0, count: 0 };
    level.set(key, series);
    this.#series.push(series);
    return series;
  }
}
