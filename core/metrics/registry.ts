/**
 * A small Prometheus registry: counters, gauges and histograms with labels, rendered in the
 * text exposition format 0.0.4. Hand-written rather than the OpenTelemetry metrics SDK so that
 * recording on the request path is a map lookup and an addition (the gateway-overhead budget
 * is under a millisecond), and so money counters stay exact integers (`bigint`).
 */

export type Labels = Readonly<Record<string, string>>;

export interface Counter {
  inc(labels?: Labels, by?: number | bigint): void;
}

export interface Gauge {
  set(labels: Labels, value: number | bigint): void;
}

export interface Histogram {
  /** `value` in the histogram's unit (seconds for durations). */
  observe(labels: Labels, value: number): void;
}

/** One series as collected, for exporters other than the text format (OTLP). */
export interface SeriesSnapshot {
  readonly labels: Labels;
  /** Counters and gauges. */
  readonly value?: number | bigint;
  /** Histograms: per-bucket (not cumulative) counts, the last one for values above every bound. */
  readonly histogram?: {
    readonly bounds: readonly number[];
    readonly counts: readonly number[];
    readonly sum: number;
    readonly count: number;
  };
}

export interface FamilySnapshot {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly series: readonly SeriesSnapshot[];
}

export interface MetricsRegistry {
  counter(name: string, help: string, labelNames?: readonly string[]): Counter;
  gauge(name: string, help: string, labelNames?: readonly string[]): Gauge;
  histogram(name: string, help: string, labelNames?: readonly string[], buckets?: readonly number[]): Histogram;
  /** Runs before every render (e.g. to read gauges from the database); errors are reported, not thrown. */
  onCollect(collect: () => Promise<void>): void;
  /** The exposition text. */
  render(): Promise<string>;
  /** Every family's current values (collectors run first), e.g. for OTLP export. */
  snapshot(): Promise<FamilySnapshot[]>;
  /**
   * Families recorded elsewhere (the core's thread under `svc serve`), rendered and exported
   * after this registry's own; a source that fails counts as a failed collector.
   */
  include(source: () => Promise<readonly FamilySnapshot[]>): void;
}

/** Seconds; from sub-millisecond gateway hops to multi-minute upstream streams. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function formatNumber(value: number | bigint): string {
  if (typeof value === 'bigint') return value.toString();
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

interface Series<T> {
  readonly labels: string;
  readonly labelValues: Labels;
  value: T;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  lines(): string[];
  series(): SeriesSnapshot[];
}

/** `{a="x",b="y"}` in the declared label order; '' without labels. Unknown label names are a bug. */
function labelKey(labelNames: readonly string[], labels: Labels | undefined, metric: string): string {
  if (labelNames.length === 0) return '';
  const parts: string[] = [];
  for (const name of labelNames) {
    const value = labels?.[name] ?? '';
    if (value !== '') parts.push(`${name}="${escapeLabel(value)}"`);
  }
  if (labels !== undefined) {
    for (const name of Object.keys(labels)) {
      if (!labelNames.includes(name)) throw new Error(`metric ${metric} has no label "${name}"`);
    }
  }
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

/**
 * The lookup key of a label set: its values in the declared order, joined by a byte that no
 * label value is expected to hold (a collision only merges two series; the exposition text
 * comes from `labelKey`, computed once per series). Allocates one string per call, where
 * `labelKey` would allocate an array, the escaped parts and the join: every request updates
 * several series.
 */
function seriesKey(labelNames: readonly string[], labels: Labels | undefined, metric: string): string {
  if (labels !== undefined) {
    for (const name in labels)
      if (!labelNames.includes(name)) throw new Error(`metric ${metric} has no label "${name}"`);
  }
  let key = '';
  for (let i = 0; i < labelNames.length; i++)
    key += (i === 0 ? '' : '\u0001') + (labels?.[labelNames[i] as string] ?? '');
  return key;
}

const ONE = 1n;

function withLabel(key: string, extra: string): string {
  return key === '' ? `{${extra}}` : `${key.slice(0, -1)},${extra}}`;
}

/** The exposition lines of a family known only by its snapshot (one from another thread). */
function snapshotLines(family: FamilySnapshot): string[] {
  return family.series.flatMap((s) => {
    const entries = Object.entries(s.labels).filter(([, v]) => v !== '');
    const key = entries.length === 0 ? '' : `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
    if (s.histogram === undefined) return [`${family.name}${key} ${formatNumber(s.value ?? 0)}`];
    const { bounds, counts, sum, count } = s.histogram;
    let cumulative = 0;
    const out = bounds.map((bound, i) => {
      cumulative += counts[i] ?? 0;
      return `${family.name}_bucket${withLabel(key, `le="${formatNumber(bound)}"`)} ${cumulative}`;
    });
    out.push(`${family.name}_bucket${withLabel(key, 'le="+Inf"')} ${count}`);
    out.push(`${family.name}_sum${key} ${formatNumber(sum)}`, `${family.name}_count${key} ${count}`);
    return out;
  });
}

/** A fresh, empty registry (one per process, created by the composition root). */
export function createRegistry(): MetricsRegistry {
  const families = new Map<string, Family>();
  const collectors: (() => Promise<void>)[] = [];
  const sources: (() => Promise<readonly FamilySnapshot[]>)[] = [];

  /** The included families, and how many sources failed. */
  async function included(): Promise<{ families: FamilySnapshot[]; failed: number }> {
    const results = await Promise.allSettled(sources.map((s) => s()));
    const families = results.flatMap((r) => (r.status === 'fulfilled' ? [...r.value] : []));
    return { families, failed: results.filter((r) => r.status === 'rejected').length };
  }

  function register(family: Family): void {
    if (!NAME_RE.test(family.name)) throw new Error(`bad metric name ${family.name}`);
    if (families.has(family.name)) throw new Error(`metric ${family.name} registered twice`);
    families.set(family.name, family);
  }

  function checkLabels(name: string, labelNames: readonly string[]): void {
    for (const l of labelNames) if (!LABEL_RE.test(l) || l === 'le') throw new Error(`bad label ${l} on ${name}`);
  }

  return {
    counter(name, help, labelNames = []) {
      checkLabels(name, labelNames);
      const series = new Map<string, Series<bigint | number>>();
      register({
        name,
        help,
        type: 'counter',
        lines: () => [...series.values()].map((s) => `${name}${s.labels} ${formatNumber(s.value)}`),
        series: () => [...series.values()].map((s) => ({ labels: s.labelValues, value: s.value })),
      });
      return {
        inc(labels, by = 1) {
          if (typeof by === 'number' ? !(by >= 0) : by < 0n) throw new Error(`counter ${name} cannot go down`);
          const key = seriesKey(labelNames, labels, name);
          const s = series.get(key);
          // Integers stay bigint so credit totals are exact however large they grow.
          const step = by === 1 ? ONE : typeof by === 'bigint' || Number.isInteger(by) ? BigInt(by) : by;
          if (s === undefined)
            series.set(key, { labels: labelKey(labelNames, labels, name), labelValues: { ...labels }, value: step });
          else if (typeof s.value === 'bigint' && typeof step === 'bigint') s.value += step;
          else s.value = Number(s.value) + Number(step);
        },
      };
    },

    gauge(name, help, labelNames = []) {
      checkLabels(name, labelNames);
      const series = new Map<string, Series<number | bigint>>();
      register({
        name,
        help,
        type: 'gauge',
        lines: () => [...series.values()].map((s) => `${name}${s.labels} ${formatNumber(s.value)}`),
        series: () => [...series.values()].map((s) => ({ labels: s.labelValues, value: s.value })),
      });
      return {
        set(labels, value) {
          const key = seriesKey(labelNames, labels, name);
          const s = series.get(key);
          if (s === undefined)
            series.set(key, { labels: labelKey(labelNames, labels, name), labelValues: { ...labels }, value });
          else s.value = value;
        },
      };
    },

    histogram(name, help, labelNames = [], buckets = DURATION_BUCKETS) {
      checkLabels(name, labelNames);
      const bounds = [...buckets].sort((a, b) => a - b);
      const series = new Map<string, Series<{ counts: number[]; sum: number; count: number }>>();
      register({
        name,
        help,
        type: 'histogram',
        series: () =>
          [...series.values()].map((s) => ({
            labels: s.labelValues,
            histogram: {
              bounds,
              counts: [...s.value.counts, s.value.count - s.value.counts.reduce((x, y) => x + y, 0)],
              sum: s.value.sum,
              count: s.value.count,
            },
          })),
        lines: () =>
          [...series.values()].flatMap((s) => {
            let cumulative = 0;
            const out = bounds.map((bound, i) => {
              cumulative += s.value.counts[i] ?? 0;
              return `${name}_bucket${withLabel(s.labels, `le="${formatNumber(bound)}"`)} ${cumulative}`;
            });
            out.push(`${name}_bucket${withLabel(s.labels, 'le="+Inf"')} ${s.value.count}`);
            out.push(`${name}_sum${s.labels} ${formatNumber(s.value.sum)}`);
            out.push(`${name}_count${s.labels} ${s.value.count}`);
            return out;
          }),
      });
      return {
        observe(labels, value) {
          const key = seriesKey(labelNames, labels, name);
          let s = series.get(key);
          if (s === undefined) {
            s = {
              labels: labelKey(labelNames, labels, name),
              labelValues: { ...labels },
              value: { counts: bounds.map(() => 0), sum: 0, count: 0 },
            };
            series.set(key, s);
          }
          let i = 0;
          while (i < bounds.length && !(value <= (bounds[i] as number))) i++;
          if (i < bounds.length) s.value.counts[i] = (s.value.counts[i] ?? 0) + 1;
          s.value.sum += value;
          s.value.count += 1;
        },
      };
    },

    onCollect(collect) {
      collectors.push(collect);
    },

    include(source) {
      sources.push(source);
    },

    async snapshot() {
      await Promise.allSettled(collectors.map((c) => c()));
      const own = [...families.values()].map((f) => ({ name: f.name, help: f.help, type: f.type, series: f.series() }));
      const others = (await included()).families.filter((f) => !families.has(f.name));
      return [...own, ...others];
    },

    async render() {
      const [collected, other] = await Promise.all([Promise.allSettled(collectors.map((c) => c())), included()]);
      const failed = collected.filter((r) => r.status === 'rejected').length + other.failed;
      const text: string[] = [];
      for (const f of families.values()) {
        text.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`, ...f.lines());
      }
      for (const f of other.families) {
        if (families.has(f.name)) continue;
        text.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`, ...snapshotLines(f));
      }
      text.push(
        '# HELP svc_metrics_collect_errors Collectors that failed during this scrape (e.g. the database was unreachable).',
        '# TYPE svc_metrics_collect_errors gauge',
        `svc_metrics_collect_errors ${failed}`,
      );
      return `${text.join('\n')}\n`;
    },
  };
}

/**
 * The families of several processes of one service (the workers of `svc serve --workers N`) as
 * one: counters and histograms add up series by series (same labels); a gauge takes the largest
 * value, since svc's gauges are either read from the shared database (every worker sees the same)
 * or say whether something is open anywhere (a circuit breaker).
 */
export function mergeSnapshots(perProcess: readonly (readonly FamilySnapshot[])[]): FamilySnapshot[] {
  const merged = new Map<string, { family: FamilySnapshot; series: Map<string, SeriesSnapshot> }>();
  for (const families of perProcess) {
    for (const family of families) {
      let entry = merged.get(family.name);
      if (entry === undefined) {
        entry = { family, series: new Map() };
        merged.set(family.name, entry);
      }
      for (const s of family.series) {
        const key = JSON.stringify(Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
        const seen = entry.series.get(key);
        entry.series.set(key, seen === undefined ? s : combine(family.type, seen, s));
      }
    }
  }
  return [...merged.values()].map(({ family, series }) => ({ ...family, series: [...series.values()] }));
}

function combine(type: FamilySnapshot['type'], a: SeriesSnapshot, b: SeriesSnapshot): SeriesSnapshot {
  if (type === 'histogram' && a.histogram !== undefined && b.histogram !== undefined) {
    const ha = a.histogram;
    const hb = b.histogram;
    if (ha.bounds.length !== hb.bounds.length || ha.bounds.some((bound, i) => bound !== hb.bounds[i])) return a;
    return {
      labels: a.labels,
      histogram: {
        bounds: ha.bounds,
        counts: ha.counts.map((c, i) => c + (hb.counts[i] ?? 0)),
        sum: ha.sum + hb.sum,
        count: ha.count + hb.count,
      },
    };
  }
  const va = a.value ?? 0;
  const vb = b.value ?? 0;
  if (type === 'gauge') return Number(vb) > Number(va) ? b : a;
  // Counters: integers stay exact (bigint) when both are whole.
  const whole = (v: number | bigint): boolean => typeof v === 'bigint' || Number.isInteger(v);
  const value = whole(va) && whole(vb) ? BigInt(va) + BigInt(vb) : Number(va) + Number(vb);
  return { labels: a.labels, value };
}
