// Issues 7, 18 and 35: the performance goals, judged from one run's rows: each is met, or short by how much.
// Reported by the bench only; no test asserts them (the numbers depend on the machine).
import type { BenchRow } from '../types';
import { VARIANTS } from './peers';

export interface GoalResult {
  readonly goal: string;
  /** What was measured, in words with its unit; null when the run has no number for it. */
  readonly measured: string | null;
  readonly met: boolean | null;
  /** "met", or how far off, or why there is no verdict. */
  readonly verdict: string;
}

type Pick = (r: BenchRow) => boolean;

const SVC = VARIANTS.svc;
const PORTKEY = VARIANTS.portkey;
const PROXY = VARIANTS.proxy;

function value(rows: readonly BenchRow[], pick: Pick): number | null {
  return rows.find(pick)?.value ?? null;
}

function fmt(v: number): string {
  const abs = Math.abs(v);
  if (abs >= 1000) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(abs >= 100 ? 0 : abs >= 10 ? 1 : 2);
}

function atLeast(goal: string, measured: number | null, target: number, unit: string, detail = ''): GoalResult {
  if (measured === null) return { goal, measured: null, met: null, verdict: 'not measured in this run' };
  const text = `${fmt(measured)}${unit}${detail}`;
  if (measured >= target) return { goal, measured: text, met: true, verdict: 'met' };
  return {
    goal,
    measured: text,
    met: false,
    verdict: `short: ${((measured / target) * 100).toFixed(0)}% of the goal, needs ${measured > 0 ? `${fmt(target / measured)}×` : 'any'} more`,
  };
}

function below(goal: string, measured: number | null, limit: number, unit: string): GoalResult {
  if (measured === null) return { goal, measured: null, met: null, verdict: 'not measured in this run' };
  const text = `${fmt(measured)}${unit}`;
  if (measured < limit) return { goal, measured: text, met: true, verdict: 'met' };
  return {
    goal,
    measured: text,
    met: false,
    verdict: `over by ${fmt(measured - limit)}${unit} (${fmt(measured / limit)}× the limit)`,
  };
}

function ratio(rows: readonly BenchRow[], scenario: Pick, a: string, b: string): { r: number; detail: string } | null {
  const va = value(rows, (r) => scenario(r) && r.variant === a && r.metric === 'throughput');
  const vb = value(rows, (r) => scenario(r) && r.variant === b && r.metric === 'throughput');
  if (va === null || vb === null || vb <= 0) return null;
  return { r: va / vb, detail: ` (${fmt(va)} vs ${fmt(vb)} req/s)` };
}

/** Every goal of issues 7 and 18 against `rows`. */
export function judgeGoals(rows: readonly BenchRow[]): GoalResult[] {
  const nonStream: Pick = (r) => r.scenario.startsWith('chat non-stream, upstream 0 ms');
  const stream: Pick = (r) => r.scenario.startsWith('chat stream') && r.scenario.includes('upstream 0 ms');
  const added: Pick = (r) => r.scenario.startsWith('chat added latency') && r.variant === SVC;
  const out: GoalResult[] = [];
  for (const [label, scenario] of [
    ['non-stream', nonStream],
    ['stream', stream],
  ] as const) {
    const vsPortkey = ratio(rows, scenario, SVC, PORTKEY);
    out.push(atLeast(`svc ≥ 3× Portkey's throughput (chat ${label})`, vsPortkey?.r ?? null, 3, '×', vsPortkey?.detail));
    const vsProxy = ratio(rows, scenario, SVC, PROXY);
    out.push(
      atLeast(`svc ≥ ½ the bare proxy's throughput (chat ${label})`, vsProxy?.r ?? null, 0.5, '×', vsProxy?.detail),
    );
  }
  // The split topology (`svc core` + `svc gateway`, one each) against Portkey, and what it adds.
  for (const [label, scenario] of [
    ['non-stream', nonStream],
    ['stream', stream],
  ] as const) {
    const split = ratio(rows, scenario, VARIANTS.svcSplit, PORTKEY);
    out.push(atLeast(`svc split ≥ 2× Portkey's throughput (chat ${label})`, split?.r ?? null, 2, '×', split?.detail));
  }
  out.push(
    below(
      'svc split: added latency p99 at 500 req/s < 10 ms',
      value(
        rows,
        (r) =>
          r.scenario.startsWith('chat added latency') && r.variant === VARIANTS.svcSplit && r.metric === 'added p99',
      ),
      10,
      ' ms',
    ),
  );
  // `svc serve --workers 2` against one worker, measured side by side (bench/scenarios/workers.ts).
  const workers = ratio(
    rows,
    (r) => r.scenario.startsWith('workers: chat non-stream'),
    VARIANTS.svcWorkers,
    'svc serve --workers 1',
  );
  out.push(
    atLeast('svc --workers 2 ≥ 1.6× one worker (chat non-stream)', workers?.r ?? null, 1.6, '×', workers?.detail),
  );
  out.push(
    below(
      'added latency p50 at 500 req/s < 1 ms',
      value(rows, (r) => added(r) && r.metric === 'added p50'),
      1,
      ' ms',
    ),
  );
  out.push(
    below(
      'added latency p99 at 500 req/s < 5 ms',
      value(rows, (r) => added(r) && r.metric === 'added p99'),
      5,
      ' ms',
    ),
  );
  out.push(
    below(
      'added time to first token (p50) < 1 ms',
      value(rows, (r) => added(r) && r.metric === 'added TTFT p50'),
      1,
      ' ms',
    ),
  );
  const mcp = (variant: string): number | null =>
    value(
      rows,
      (r) => r.scenario.startsWith('mcp tools/call') && r.variant.startsWith(variant) && r.metric === 'throughput',
    );
  const mcpSvc = mcp('svc');
  const mcpBare = mcp('bare SDK');
  out.push(
    atLeast(
      'MCP tools/call through svc ≥ 2× the bare SDK server',
      mcpSvc !== null && mcpBare !== null && mcpBare > 0 ? mcpSvc / mcpBare : null,
      2,
      '×',
      mcpSvc !== null && mcpBare !== null ? ` (${fmt(mcpSvc)} vs ${fmt(mcpBare)} calls/s)` : '',
    ),
  );
  const hot = rows.filter(
    (r) =>
      r.scenario.startsWith('wallet mariadb 1 hot wallet') &&
      r.variant.includes('batched') &&
      r.metric === 'throughput',
  );
  const best = hot.length === 0 ? null : hot.reduce((a, b) => (b.value > a.value ? b : a));
  out.push(
    atLeast(
      '5,000 settled charges/s on one hot MariaDB wallet',
      best?.value ?? null,
      5000,
      ' pairs/s',
      best === undefined || best === null ? '' : ` (${best.variant})`,
    ),
  );
  // Issue 35: the goal is in MB (10^6 bytes); the bench reads MiB (2^20): 150 MB is 143.1 MiB.
  const rssMiB = value(rows, (r) => r.scenario.startsWith('memory at') && r.variant === SVC);
  out.push(below('svc RSS < 150 MB at steady load', rssMiB === null ? null : (rssMiB * 1_048_576) / 1e6, 150, ' MB'));
  // And over the whole soak (its highest sample), so a slow climb cannot hide between phases.
  const soakMax = value(rows, (r) => r.scenario.startsWith('memory soak') && r.metric === 'RSS (max)');
  out.push(
    below('svc RSS < 150 MB over the soak (max)', soakMax === null ? null : (soakMax * 1_048_576) / 1e6, 150, ' MB'),
  );
  const soak = rows.find((r) => r.scenario.startsWith('memory soak') && r.metric === 'RSS growth');
  const soakSeconds = Number(/^memory soak (\d+) s/.exec(soak?.scenario ?? '')?.[1] ?? 0);
  const growth = below(
    'svc RSS does not grow over a 10-minute soak (< 10 MiB, GC noise)',
    soak?.value ?? null,
    10,
    ' MiB',
  );
  // A short soak mostly shows the heaps sizing up: its number is shown, not judged.
  out.push(
    soak !== undefined && soakSeconds < 600
      ? {
          ...growth,
          met: null,
          verdict: `not judged: a ${soakSeconds} s soak is too short (the full run soaks 10 minutes)`,
        }
      : growth,
  );
  return out;
}

/** The goals as a Markdown table. */
export function goalsTable(goals: readonly GoalResult[]): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  return [
    '| goal | measured | verdict |',
    '|---|---:|---|',
    ...goals.map(
      (g) =>
        `| ${esc(g.goal)} | ${esc(g.measured ?? '—')} | ${g.met === true ? '**met**' : g.met === false ? `**not met**: ${esc(g.verdict)}` : esc(g.verdict)} |`,
    ),
  ].join('\n');
}
