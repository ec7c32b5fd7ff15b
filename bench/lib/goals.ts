// Issues 7, 18, 35 and 46: the performance goals, judged from one run's rows: each is met, or short by how much.
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
  /**
   * What the same run measured beside it that a miss is read against: the same figure of the
   * peers under the same load (CPU per request, added latency, RSS); '' when it has none.
   */
  readonly beside: string;
}

type Pick = (r: BenchRow) => boolean;

const SVC = VARIANTS.svc;
const PORTKEY = VARIANTS.portkey;
const PROXY = VARIANTS.proxy;
const SPLIT = VARIANTS.svcSplit;
const SPLIT_DIRECT = VARIANTS.svcSplitDirect;
const GATEWAY = VARIANTS.svcSplitGateway;
const CORE = VARIANTS.svcSplitCore;

function value(rows: readonly BenchRow[], pick: Pick): number | null {
  return rows.find(pick)?.value ?? null;
}

function fmt(v: number): string {
  const abs = Math.abs(v);
  if (abs >= 1000) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(abs >= 100 ? 0 : abs >= 10 ? 1 : 2);
}

function atLeast(
  goal: string,
  measured: number | null,
  target: number,
  unit: string,
  detail = '',
  beside = '',
): GoalResult {
  if (measured === null) return { goal, measured: null, met: null, verdict: 'not measured in this run', beside };
  const text = `${fmt(measured)}${unit}${detail}`;
  if (measured >= target) return { goal, measured: text, met: true, verdict: 'met', beside };
  return {
    goal,
    measured: text,
    met: false,
    verdict: `short: ${((measured / target) * 100).toFixed(0)}% of the goal, needs ${measured > 0 ? `${fmt(target / measured)}×` : 'any'} more`,
    beside,
  };
}

function below(goal: string, measured: number | null, limit: number, unit: string, beside = ''): GoalResult {
  if (measured === null) return { goal, measured: null, met: null, verdict: 'not measured in this run', beside };
  const text = `${fmt(measured)}${unit}`;
  if (measured < limit) return { goal, measured: text, met: true, verdict: 'met', beside };
  return {
    goal,
    measured: text,
    met: false,
    verdict: `over by ${fmt(measured - limit)}${unit} (${fmt(measured / limit)}× the limit)`,
    beside,
  };
}

/** `label value unit` for each named figure the run has, joined by commas ('' when it has none). */
function figures(prefix: string, parts: readonly (readonly [string, number | null])[], unit: string): string {
  const known = parts.filter((p): p is readonly [string, number] => p[1] !== null);
  return known.length === 0 ? '' : `${prefix}${known.map(([label, v]) => `${label} ${fmt(v)}${unit}`).join(', ')}`;
}

function ratio(rows: readonly BenchRow[], scenario: Pick, a: string, b: string): { r: number; detail: string } | null {
  const va = value(rows, (r) => scenario(r) && r.variant === a && r.metric === 'throughput');
  const vb = value(rows, (r) => scenario(r) && r.variant === b && r.metric === 'throughput');
  if (va === null || vb === null || vb <= 0) return null;
  return { r: va / vb, detail: ` (${fmt(va)} vs ${fmt(vb)} req/s)` };
}

/** Every goal of issues 7, 18, 35 and 46 against `rows`. */
export function judgeGoals(rows: readonly BenchRow[]): GoalResult[] {
  const nonStream: Pick = (r) => r.scenario.startsWith('chat non-stream, upstream 0 ms');
  const stream: Pick = (r) => r.scenario.startsWith('chat stream') && r.scenario.includes('upstream 0 ms');
  const added: Pick = (r) => r.scenario.startsWith('chat added latency') && r.variant === SVC;
  const addedBy = (variant: string, metric: string): number | null =>
    value(rows, (r) => r.scenario.startsWith('chat added latency') && r.variant === variant && r.metric === metric);
  // Process CPU per answered request at c=32 (bench/lib/cpu.ts): when every peer is short of CPU,
  // the throughput ratios follow these.
  const cpu = (variant: string, label: 'non-stream' | 'stream'): number | null =>
    value(
      rows,
      (r) => r.scenario.startsWith('CPU per answered request') && r.variant === variant && r.metric === label,
    );
  // The event loop's delay inside a svc process over the 500 req/s phase (bench/lib/loop-probe.cjs).
  const loop = (variant: string, metric: 'p99' | 'max'): number | null =>
    value(
      rows,
      (r) => r.scenario.startsWith('event-loop delay') && r.variant === variant && r.metric === `loop delay ${metric}`,
    );
  /** 'event-loop delay p99 / max: gateway 3.10 / 41.0 ms, …' for the processes the run read. */
  const loops = (parts: readonly (readonly [string, string])[]): string => {
    const known = parts.flatMap(([label, variant]) => {
      const p99 = loop(variant, 'p99');
      const max = loop(variant, 'max');
      return p99 === null || max === null ? [] : [`${label} ${fmt(p99)} / ${fmt(max)} ms`];
    });
    return known.length === 0 ? '' : `event-loop delay p99 / max: ${known.join(', ')}`;
  };
  const out: GoalResult[] = [];
  for (const [label, scenario] of [
    ['non-stream', nonStream],
    ['stream', stream],
  ] as const) {
    // Against each peer, the CPU each spends per request is what the ratio is read against.
    for (const [peer, name, target, goal] of [
      [PORTKEY, 'Portkey', 3, "3× Portkey's"],
      [PROXY, 'bare proxy', 0.5, "½ the bare proxy's"],
    ] as const) {
      const vs = ratio(rows, scenario, SVC, peer);
      out.push(
        atLeast(
          `svc ≥ ${goal} throughput (chat ${label})`,
          vs?.r ?? null,
          target,
          '×',
          vs?.detail,
          figures(
            'CPU per request: ',
            [
              ['svc', cpu(SVC, label)],
              [name, cpu(peer, label)],
            ],
            ' µs',
          ),
        ),
      );
    }
  }
  // The split topology (`svc core` + `svc gateway`, one each) against Portkey, and what it adds.
  for (const [label, scenario] of [
    ['non-stream', nonStream],
    ['stream', stream],
  ] as const) {
    const split = ratio(rows, scenario, SPLIT, PORTKEY);
    // The same split with a gRPC call per call (no tunnel): what issue 46's point 1 changed.
    const direct = ratio(rows, scenario, SPLIT_DIRECT, PORTKEY);
    out.push(
      atLeast(
        `svc split ≥ 2× Portkey's throughput (chat ${label})`,
        split?.r ?? null,
        2,
        '×',
        split?.detail,
        [
          figures(
            'CPU per request: ',
            [
              ['split (both processes)', cpu(SPLIT, label)],
              ['its gateway', cpu(GATEWAY, label)],
              ['its core', cpu(CORE, label)],
              ['svc serve', cpu(SVC, label)],
              ['Portkey', cpu(PORTKEY, label)],
            ],
            ' µs',
          ),
          direct === null
            ? ''
            : `the split without its tunnel (SVC_CORE_TUNNELS=0): ${fmt(direct.r)}×${direct.detail}, ${fmt(cpu(SPLIT_DIRECT, label) ?? NaN)} µs per request`,
        ]
          .filter((part) => part !== '')
          .join('; '),
      ),
    );
  }
  out.push(
    below(
      'svc split: added latency p99 at 500 req/s < 10 ms',
      addedBy(SPLIT, 'added p99'),
      10,
      ' ms',
      [
        figures(
          'added p99: ',
          [
            ['svc serve', addedBy(SVC, 'added p99')],
            ['Portkey', addedBy(PORTKEY, 'added p99')],
          ],
          ' ms',
        ),
        loops([
          ['gateway', GATEWAY],
          ['core', CORE],
        ]),
      ]
        .filter((t) => t !== '')
        .join('; '),
    ),
  );
  // `svc serve --workers 2` against one worker, measured side by side (bench/scenarios/workers.ts).
  const workers = ratio(
    rows,
    (r) => r.scenario.startsWith('workers: chat non-stream'),
    VARIANTS.svcWorkers,
    'svc serve --workers 1',
  );
  // The bare proxy run the same way (one process, then two) says what a second worker can get here.
  const proxyWorkers = ratio(
    rows,
    (r) => r.scenario.startsWith('workers: chat non-stream'),
    VARIANTS.proxyWorkers,
    'bare passthrough proxy, 1 worker',
  );
  const workersCpu = (variant: string): number | null =>
    value(rows, (r) => r.scenario.startsWith('workers: CPU per answered request') && r.variant === variant);
  out.push(
    atLeast(
      'svc --workers 2 ≥ 1.6× one worker (chat non-stream)',
      workers?.r ?? null,
      1.6,
      '×',
      workers?.detail,
      [
        proxyWorkers === null ? '' : `the bare proxy, 2 workers / 1: ${fmt(proxyWorkers.r)}×`,
        figures(
          'svc CPU per request: ',
          [
            ['2 workers', workersCpu(VARIANTS.svcWorkers)],
            ['1', workersCpu('svc serve --workers 1')],
          ],
          ' µs',
        ),
      ]
        .filter((s) => s !== '')
        .join('; '),
    ),
  );
  for (const [goal, metric, limit] of [
    ['added latency p50 at 500 req/s < 1 ms', 'added p50', 1],
    ['added latency p99 at 500 req/s < 5 ms', 'added p99', 5],
    ['added time to first token (p50) < 1 ms', 'added TTFT p50', 1],
  ] as const)
    out.push(
      below(
        goal,
        value(rows, (r) => added(r) && r.metric === metric),
        limit,
        ' ms',
        [
          figures(
            'the same load through ',
            [
              ['Portkey', addedBy(PORTKEY, metric)],
              ['the bare proxy', addedBy(PROXY, metric)],
            ],
            ' ms',
          ),
          // What the tail waits on inside svc: its own loop's stalls under the same load.
          metric === 'added p99' ? loops([['svc serve', SVC]]) : '',
        ]
          .filter((t) => t !== '')
          .join('; '),
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
  const rssOf = (variant: string, metric = 'RSS (max)'): number | null =>
    value(rows, (r) => r.scenario.startsWith('memory at') && r.variant === variant && r.metric === metric);
  const mb = (mib: number | null): number | null => (mib === null ? null : (mib * 1_048_576) / 1e6);
  out.push(
    below(
      'svc RSS < 150 MB at steady load',
      mb(rssOf(SVC)),
      150,
      ' MB',
      figures(
        'at the same load: ',
        [
          ['the bare proxy', mb(rssOf(PROXY))],
          ['Portkey', mb(rssOf(PORTKEY))],
          ['svc serve right after the load', mb(rssOf(SVC, 'RSS after the load'))],
        ],
        ' MB',
      ),
    ),
  );
  // Issue 46: each process of the split topology under the same limit, at the same load.
  for (const [name, variant] of [
    ['gateway', GATEWAY],
    ['core', CORE],
  ] as const)
    out.push(
      below(
        `svc split: the ${name} process's RSS < 150 MB at steady load`,
        mb(rssOf(variant)),
        150,
        ' MB',
        figures(
          'at the same load: ',
          [
            [`the ${name} right after it`, mb(rssOf(variant, 'RSS after the load'))],
            ['both processes together', mb(rssOf(SPLIT))],
          ],
          ' MB',
        ),
      ),
    );
  // And over the whole soak (its highest sample), so a slow climb cannot hide between phases.
  const soakRow = (metric: string): number | null =>
    value(rows, (r) => r.scenario.startsWith('memory soak') && r.metric === metric);
  out.push(
    below(
      'svc RSS < 150 MB over the soak (max)',
      mb(soakRow('RSS (max)')),
      150,
      ' MB',
      figures(
        'RSS ',
        [
          ['at its start', mb(soakRow('RSS at start'))],
          ['at its end', mb(soakRow('RSS at end'))],
        ],
        ' MB',
      ),
    ),
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
    '| goal | measured | verdict | beside it in the same run |',
    '|---|---:|---|---|',
    ...goals.map(
      (g) =>
        `| ${esc(g.goal)} | ${esc(g.measured ?? '—')} | ${g.met === true ? '**met**' : g.met === false ? `**not met**: ${esc(g.verdict)}` : esc(g.verdict)} | ${g.beside === '' ? '—' : esc(g.beside)} |`,
    ),
  ].join('\n');
}
