// The latency-vs-load chart as a hand-written SVG: for each variant, p50 (solid) and p99 (dashed)
// latency against the offered load, both axes logarithmic, from the rows that carry a `load`.
import type { BenchRow } from '../types';

const COLORS = ['#4c78a8', '#72b7b2', '#e45756', '#f58518', '#54a24b', '#b279a2'];
const W = 760;
const H = 440;
const M = { left: 64, right: 220, top: 40, bottom: 52 };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Ticks at 1, 2, 5 × powers of ten within [lo, hi]. */
function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= lo && v <= hi) ticks.push(v);
    }
  return ticks;
}

function label(v: number): string {
  return v >= 1000 ? `${v / 1000}k` : String(v);
}

/** The SVG, or null when no row carries a load. */
export function latencyChart(rows: readonly BenchRow[], title: string): string | null {
  const points = rows.filter(
    (r) => r.load !== undefined && (r.metric === 'latency p50' || r.metric === 'latency p99') && r.value > 0,
  );
  if (points.length === 0) return null;
  const variants = [...new Set(points.map((r) => r.variant))];
  const loads = points.map((r) => r.load ?? 1);
  const values = points.map((r) => r.value);
  const x0 = Math.min(...loads) / 1.25;
  const x1 = Math.max(...loads) * 1.25;
  const steps = logTicks(0.01, 1e6);
  const y0 = [...steps].reverse().find((t) => t <= Math.min(...values)) ?? 0.01;
  const y1 = steps.find((t) => t >= Math.max(...values) * 1.05) ?? 1e6;
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const sx = (v: number): number => M.left + ((Math.log(v) - Math.log(x0)) / (Math.log(x1) - Math.log(x0))) * pw;
  const sy = (v: number): number => M.top + ph - ((Math.log(v) - Math.log(y0)) / (Math.log(y1) - Math.log(y0))) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${M.left}" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`,
  ];
  for (const t of logTicks(y0, y1)) {
    const y = sy(t).toFixed(1);
    out.push(`<line x1="${M.left}" x2="${M.left + pw}" y1="${y}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${label(t)}</text>`);
  }
  for (const t of [...new Set(loads)].sort((a, b) => a - b)) {
    const x = sx(t).toFixed(1);
    out.push(`<line x1="${x}" x2="${x}" y1="${M.top}" y2="${M.top + ph}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${x}" y="${M.top + ph + 16}" text-anchor="middle">${label(t)}</text>`);
  }
  out.push(
    `<rect x="${M.left}" y="${M.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`,
    `<text x="${M.left + pw / 2}" y="${H - 12}" text-anchor="middle">offered load (requests/s, log scale)</text>`,
    `<text transform="translate(16 ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">latency, ms (log scale)</text>`,
  );
  variants.forEach((variant, i) => {
    const color = COLORS[i % COLORS.length] ?? '#000';
    for (const [metric, dash] of [
      ['latency p50', ''],
      ['latency p99', ' stroke-dasharray="5 4"'],
    ] as const) {
      const series = points
        .filter((r) => r.variant === variant && r.metric === metric)
        .sort((a, b) => (a.load ?? 0) - (b.load ?? 0));
      if (series.length === 0) continue;
      const d = series.map((r, k) => `${k === 0 ? 'M' : 'L'}${sx(r.load ?? 1).toFixed(1)},${sy(r.value).toFixed(1)}`);
      out.push(`<path d="${d.join(' ')}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
      for (const r of series)
        out.push(
          `<circle cx="${sx(r.load ?? 1).toFixed(1)}" cy="${sy(r.value).toFixed(1)}" r="3" fill="${color}"><title>${esc(`${variant} ${metric} @${r.load ?? 0} req/s: ${r.value.toFixed(2)} ms`)}</title></circle>`,
        );
    }
    const ly = M.top + 10 + i * 20;
    const lx = M.left + pw + 16;
    out.push(`<line x1="${lx}" x2="${lx + 24}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="3"/>`);
    out.push(`<text x="${lx + 30}" y="${ly}" dominant-baseline="middle">${esc(variant)}</text>`);
  });
  const ly = M.top + 20 + variants.length * 20;
  const lx = M.left + pw + 16;
  out.push(
    `<line x1="${lx}" x2="${lx + 24}" y1="${ly}" y2="${ly}" stroke="#333" stroke-width="2"/>`,
    `<text x="${lx + 30}" y="${ly}" dominant-baseline="middle">p50</text>`,
    `<line x1="${lx}" x2="${lx + 24}" y1="${ly + 18}" y2="${ly + 18}" stroke="#333" stroke-width="2" stroke-dasharray="5 4"/>`,
    `<text x="${lx + 30}" y="${ly + 18}" dominant-baseline="middle">p99</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
