// autocannon (npm) in a child process: the bench's load generator for throughput at fixed
// concurrency. It reports latency in whole milliseconds, so sub-millisecond figures and stream
// timings come from ./loadgen instead.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './children';

const exec = promisify(execFile);
const AUTOCANNON = path.join(ROOT, 'node_modules/autocannon/autocannon.js');

export interface AutocannonSpec {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly connections: number;
  readonly seconds: number;
  /** Requests per second over all connections; unpaced without it. */
  readonly rate?: number;
}

export interface AutocannonLoad {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly total: number;
}

/** Runs autocannon; rejects when any request failed, timed out or was not a 2xx. */
export async function autocannon(spec: AutocannonSpec): Promise<AutocannonLoad> {
  const headers = Object.entries({ 'content-type': 'application/json', ...spec.headers }).flatMap(([k, v]) => [
    '-H',
    `${k}=${v}`,
  ]);
  const args = [AUTOCANNON, '--json', '-c', String(spec.connections), '-d', String(spec.seconds), '-m', 'POST'];
  args.push(...headers, '-b', spec.body);
  if (spec.rate !== undefined) args.push('-R', String(spec.rate));
  const { stdout } = await exec(process.execPath, [...args, spec.url], {
    maxBuffer: 16 * 1024 * 1024,
    timeout: (spec.seconds + 60) * 1000,
  });
  const r = JSON.parse(stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  };
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
    throw new Error(`${spec.url}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts under load`);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total };
}
