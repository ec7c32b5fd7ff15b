import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { latencyChart } from './chart';
import { goalsTable, judgeGoals } from './goals';
import { markdownTable, type ReportRow } from './report';

export interface RunInfo {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly quick: boolean;
  /** The command line that made these results, as a person would type it. */
  readonly command: string;
  readonly scenarios: readonly string[];
  readonly failures: readonly { scenario: string; error: string }[];
  /** os.loadavg() when the run started: how busy the machine was with other work. */
  readonly loadAverage: readonly number[];
}

/** Where docs/performance.md shows the chart from (a committed copy, written by `--publish`). */
export const PUBLISHED_CHART = 'bench/latency-vs-load.svg';

export function machine(): Record<string, string | number> {
  const cpus = os.cpus();
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    // Not a checkout: the results are still valid, just unattributed.
  }
  return {
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    commit,
  };
}

/**
 * The Markdown report, in exactly the shape of docs/performance.md between its
 * `bench:start`/`bench:end` markers (so `--publish` can put it there as it is).
 */
export function markdownReport(
  info: RunInfo,
  env: Record<string, string | number>,
  rows: readonly ReportRow[],
): string {
  const load = info.loadAverage.map((v) => v.toFixed(2)).join(' / ');
  const chart = rows.some((r) => r.load !== undefined);
  return [
    `Latest run: \`${info.command}\`, ${info.startedAt.slice(0, 16).replace('T', ' ')} UTC, commit ${String(env['commit'])}; ` +
      `${String(env['cpu'])} × ${String(env['cores'])} cores, ${String(env['memoryGiB'])} GiB, Node ${String(env['node'])}, ` +
      `${String(env['platform'])}; load average at the start ${load} (1/5/15 min).`,
    '',
    '**Goals of issues 7, 18, 35 and 46** (judged by `bench/lib/goals.ts` from this run):',
    '',
    goalsTable(judgeGoals(rows)),
    '',
    ...(chart
      ? [`![Latency against offered load, p50 and p99, each peer in front of a 60 ms upstream](${PUBLISHED_CHART})`, '']
      : []),
    ...(info.failures.length > 0
      ? [
          '**Failed in this run:**',
          '',
          ...info.failures.map((f) => `- ${f.scenario}: ${f.error.split('\n')[0] ?? ''}`),
          '',
        ]
      : []),
    '<details><summary>Every number of the run (ratios: each variant against the first of its scenario and metric)</summary>',
    '',
    markdownTable(rows),
    '',
    '</details>',
    '',
  ].join('\n');
}

function writeAside(file: string, text: string): void {
  // Written aside then renamed, so a reader never sees half a file (*.tmp is git-ignored).
  fs.writeFileSync(`${file}.tmp`, text);
  fs.renameSync(`${file}.tmp`, file);
}

/**
 * Writes `<dir>/<timestamp>.json|md`, `<dir>/latest.json|md` and `<dir>/latency-vs-load.svg`
 * (when the run has latency-vs-load rows); returns the paths written.
 */
export function writeResults(dir: string, info: RunInfo, rows: readonly ReportRow[]): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const stamp = info.startedAt.replace(/[:.]/g, '-');
  const env = machine();
  const goals = judgeGoals(rows);
  const json = JSON.stringify({ ...info, machine: env, goals, rows }, null, 2) + '\n';
  const md = markdownReport(info, env, rows);
  const written: string[] = [];
  const files: [string, string][] = [
    [`${stamp}.json`, json],
    [`${stamp}.md`, md],
    ['latest.json', json],
    ['latest.md', md],
  ];
  const svg = latencyChart(rows, 'Chat completions: latency against offered load (upstream answers in 60 ms)');
  if (svg !== null) files.push([`${stamp}.svg`, svg], ['latency-vs-load.svg', svg]);
  for (const [name, text] of files) {
    const file = path.join(dir, name);
    writeAside(file, text);
    written.push(file);
  }
  return written;
}

/**
 * Re-renders `<dir>/latest.json` (its rows, run info and machine, commit included) as
 * `latest.md` with the goals judged by the current `bench/lib/goals.ts`: after a goal's wording or
 * threshold changes, the last run is published again without measuring again.
 */
export function rerender(dir: string): string[] {
  const file = path.join(dir, 'latest.json');
  const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as RunInfo & {
    machine: Record<string, string | number>;
    rows: ReportRow[];
  };
  const { machine: env, rows, ...info } = saved;
  const goals = judgeGoals(rows);
  writeAside(file, JSON.stringify({ ...info, machine: env, goals, rows }, null, 2) + '\n');
  writeAside(path.join(dir, 'latest.md'), markdownReport(info, env, rows));
  return [file, path.join(dir, 'latest.md')];
}

const START = '<!-- bench:start (written by `npm run bench -- --publish`; edit bench/lib/results.ts instead) -->';
const END = '<!-- bench:end -->';

/**
 * Puts `<dir>/latest.md` into docs/performance.md between the bench markers and copies the chart to
 * PUBLISHED_CHART; returns the paths written.
 */
export function publish(root: string, dir: string): string[] {
  const readmePath = path.join(root, 'docs', 'performance.md');
  const readme = fs.readFileSync(readmePath, 'utf8');
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start === -1 || end < start)
    throw new Error(`docs/performance.md has no ${START} … ${END} block to publish into`);
  // The chart's link is written from the checkout's root; docs/performance.md is one folder down.
  const md = fs
    .readFileSync(path.join(dir, 'latest.md'), 'utf8')
    .replaceAll(`](${PUBLISHED_CHART})`, `](../${PUBLISHED_CHART})`);
  writeAside(readmePath, `${readme.slice(0, start + START.length)}\n\n${md}\n${readme.slice(end)}`);
  const written = [readmePath];
  const svg = path.join(dir, 'latency-vs-load.svg');
  if (fs.existsSync(svg)) {
    fs.copyFileSync(svg, path.join(root, PUBLISHED_CHART));
    written.push(path.join(root, PUBLISHED_CHART));
  }
  return written;
}
