import type { BenchRow } from '../types';

export interface ReportRow extends BenchRow {
  /**
   * value / the baseline's value for the same scenario and metric; null for a lone variant, or
   * when the baseline is not positive or the value is negative.
   */
  readonly ratio: number | null;
  readonly baseline: string | null;
}

/** Adds the ratio of each row to the first variant reported for its scenario and metric. */
export function withRatios(rows: readonly BenchRow[]): ReportRow[] {
  const baselines = new Map<string, BenchRow>();
  const counts = new Map<string, number>();
  for (const row of rows) {
    const key = `${row.scenario}\u0000${row.metric}`;
    if (!baselines.has(key)) baselines.set(key, row);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return rows.map((row) => {
    const key = `${row.scenario}\u0000${row.metric}`;
    const base = baselines.get(key);
    if (base === undefined || (counts.get(key) ?? 0) < 2) return { ...row, ratio: null, baseline: null };
    // A ratio only means something between positive quantities: "added latency" metrics can be
    // zero or negative (noise), and dividing by them gives nonsense like -55×.
    if (!(base.value > 0) || row.value < 0) return { ...row, ratio: null, baseline: base.variant };
    return { ...row, ratio: row.value / base.value, baseline: base.variant };
  });
}

function formatValue(value: number): string {
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(abs >= 1 ? 2 : 3);
}

function formatRatio(row: ReportRow): string {
  if (row.ratio === null) return '';
  return row.variant === row.baseline ? '1.00× (base)' : `${row.ratio.toFixed(2)}×`;
}

const HEADERS = ['scenario', 'variant', 'metric', 'value', 'unit', 'vs base'] as const;

function cells(row: ReportRow): string[] {
  return [row.scenario, row.variant, row.metric, formatValue(row.value), row.unit, formatRatio(row)];
}

/** A fixed-width table for the terminal. */
export function textTable(rows: readonly ReportRow[]): string {
  const body = rows.map(cells);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const numeric = new Set([3, 5]);
  const line = (r: readonly string[]): string =>
    r
      .map((c, i) => (numeric.has(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** The same table in Markdown. */
export function markdownTable(rows: readonly ReportRow[]): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  return [
    `| ${HEADERS.join(' | ')} |`,
    '|---|---|---|---:|---|---:|',
    ...rows.map((r) => `| ${cells(r).map(esc).join(' | ')} |`),
  ].join('\n');
}
