import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { markdownTable, type ReportRow } from './report';

export interface RunInfo {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly quick: boolean;
  readonly scenarios: readonly string[];
  readonly failures: readonly { scenario: string; error: string }[];
}

function machine(): Record<string, string | number> {
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

/** Writes `<dir>/<timestamp>.json|md` and `<dir>/latest.json|md`; returns the paths written. */
export function writeResults(dir: string, info: RunInfo, rows: readonly ReportRow[]): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const stamp = info.startedAt.replace(/[:.]/g, '-');
  const env = machine();
  const json = JSON.stringify({ ...info, machine: env, rows }, null, 2) + '\n';
  const md = [
    `# Benchmark ${info.startedAt}${info.quick ? ' (quick)' : ''}`,
    '',
    `Node ${String(env['node'])}, ${String(env['cpu'])} × ${String(env['cores'])}, ${String(env['memoryGiB'])} GiB, ` +
      `${String(env['platform'])}, commit ${String(env['commit'])}.`,
    '',
    'Ratios compare each variant with the first variant of the same scenario and metric.',
    '',
    markdownTable(rows),
    '',
    ...(info.failures.length > 0
      ? ['## Failed scenarios', '', ...info.failures.map((f) => `- ${f.scenario}: ${f.error}`), '']
      : []),
  ].join('\n');
  const written: string[] = [];
  for (const [name, text] of [
    [`${stamp}.json`, json],
    [`${stamp}.md`, md],
    ['latest.json', json],
    ['latest.md', md],
  ] as const) {
    const file = path.join(dir, name);
    // Written aside then renamed, so a reader never sees half a file (*.tmp is git-ignored).
    fs.writeFileSync(`${file}.tmp`, text);
    fs.renameSync(`${file}.tmp`, file);
    written.push(file);
  }
  return written;
}
