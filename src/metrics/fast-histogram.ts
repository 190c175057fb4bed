import type { Metric } from 'prom-client';

interface Series {
  /** Observations per bucket, not cumulative. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A Prometheus histogram whose `observe` is an array increment. prom-client's
 * own Histogram validates and hashes the label set on every observation,
 * which the proxy's hot path would pay on every request; this one is read
 * through the same registry (`get()` in prom-client's metric shape).
 */
export class FastHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #series = new Map<string, Series>();

  /** @param labelName the one label of the series, or undefined for a histogram without labels */
  constructor(
    readonly name: string,
    readonly help: string,
    readonly upperBounds: readonly number[],
    readonly labelName?: string,
  ) {}

  observe(value: number, labelValue = ''): void {
    let series = this.#series.get(labelValue);
    if (series === undefined) {
      series = { buckets: new Float64Array(this.upperBounds.length), sum: 0, count: 0 };
      this.#series.set(labelValue, series);
    }
    for (let index = 0; index < this.upperBounds.length; index += 1) {
      if (value <= this.upperBounds[index]!) {
        series.buckets[index]! += 1;
        break;
      }
    }
    series.sum += value;
    series.count += 1;
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> }> {
    const values = [];
    for (const [labelValue, series] of this.#series) {
      const labels: Record<string, string> = this.labelName === undefined ? {} : { [this.labelName]: labelValue };
      let cumulative = 0;
      for (let index = 0; index < this.upperBounds.length; index += 1) {
        cumulative += series.buckets[index]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: this.upperBounds[index]! }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: series.count });
      values.push({ metricName: `${this.name}_sum`, labels, value: series.sum });
      values.push({ metricName: `${this.name}_count`, labels, value: series.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.#series.clear();
  }

  /** This histogram as the registry sees its metrics. */
  asMetric(): Metric {
    return this as unknown as Metric;
  }
}
