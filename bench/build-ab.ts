// Two builds of svc side by side (`npx tsx bench/build-ab.ts --base DIR [--rounds N] [--seconds S]
// [--connections C] [--stream] [--sql]`): this checkout against another one (a `git worktree` of
// the commit to compare with, built with `npm run build` like this one), one fake upstream, one
// `svc serve` of each, autocannon on each in turn (A B, B A, …) so that a shared machine's drift
// weighs on both alike; then the median req/s and CPU µs per answered request of each, and their
// ratio. `--sql` loads bench/lib/sql-count.cjs into both servers and prints the SQL statements
// each ran per answered request, by text. Both servers' books are checked at the end.
// `npm run bench` stays the judge of goals; this isolates what one change does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checkBooks, comparison, flag, interleave, numberFlag, type AbSide } from './lib/ab';
import { killChildren } from './lib/children';
import type * as Peers from './lib/peers';

interface SqlRow {
  readonly sql: string;
  readonly count: number;
  readonly ms: number;
}

function readCounts(prefix: string): SqlRow[] {
  const dir = path.dirname(prefix);
  const rows = new Map<string, { count: number; ms: number }>();
  for (const file of fs.readdirSync(dir).filter((f) => f.startsWith(`${path.basename(prefix)}.`))) {
    for (const row of JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as SqlRow[]) {
      const r = rows.get(row.sql) ?? { count: 0, ms: 0 };
      r.count += row.count;
      r.ms += row.ms;
      rows.set(row.sql, r);
    }
  }
  return [...rows].map(([sql, r]) => ({ sql, ...r })).sort((a, b) => b.count - a.count);
}

async function main(): Promise<void> {
  const baseDir = flag('--base');
  if (baseDir === undefined) throw new Error('--base DIR: the checkout (built) to compare this one with');
  const rounds = numberFlag('--rounds', 4);
  const seconds = numberFlag('--seconds', 3);
  const connections = numberFlag('--connections', 32);
  const stream = process.argv.includes('--stream');
  const sqlCount = process.argv.includes('--sql');
  // Each build's own bench code starts its own server (its bin/svc.js, its dist/).
  process.env['SVC_BENCH_NO_BUILD'] = '1';
  /* eslint-disable @typescript-eslint/no-require-imports */
  const here = require('./lib/peers') as typeof Peers;
  const there = require(path.resolve(baseDir, 'bench/lib/peers')) as typeof Peers;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const countDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-sql-'));
  const counter = path.join(__dirname, 'lib/sql-count.cjs');
  const env = (name: string): NodeJS.ProcessEnv =>
    sqlCount
      ? {
          NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --require ${counter}`.trim(),
          SVC_SQL_COUNT: path.join(countDir, name),
        }
      : {};
  const upstream = await here.startUpstream(16);
  const peers: [string, Peers.SvcPeer][] = [
    ['base', await there.startSvcPeer(upstream.baseUrl, env('base'))],
    ['this', await here.startSvcPeer(upstream.baseUrl, env('this'))],
  ];
  const body = here.chatBody('svc-0ms', stream);
  // The peers' own endpoint and headers, and all their processes, as the base build's bench names them.
  const sides: AbSide[] = peers.map(([name, peer]) => ({
    name,
    load: { url: peer.url, headers: peer.headers, body, connections },
    pids: peer.pids ?? [peer.pid ?? 0],
  }));
  let answered = new Map<string, number>();
  let readings: Awaited<ReturnType<typeof interleave>>;
  try {
    readings = await interleave(sides, { rounds, seconds, warmupSeconds: 1 });
  } finally {
    answered = await checkBooks(peers).finally(async () => {
      await upstream.stop();
      killChildren();
    });
  }
  console.log(
    comparison(
      `chat ${stream ? 'stream' : 'non-stream'} c=${connections}`,
      ['base', readings.get('base')],
      ['this', readings.get('this')],
    ),
  );
  if (!sqlCount) return;
  for (const [name] of peers) {
    const calls = answered.get(name) ?? 0;
    const rows = readCounts(path.join(countDir, name));
    const total = rows.reduce((sum, r) => sum + r.count, 0);
    const ms = rows.reduce((sum, r) => sum + r.ms, 0);
    console.log(
      `\n${name}: ${(total / calls).toFixed(2)} SQL statements and ${((1000 * ms) / calls).toFixed(0)} µs in the driver per answered call (${calls} calls):`,
    );
    for (const r of rows.slice(0, 25))
      console.log(
        `  ${(r.count / calls).toFixed(3).padStart(7)}/call ${((1000 * r.ms) / calls).toFixed(1).padStart(6)} µs/call  ${r.sql.slice(0, 110)}`,
      );
  }
  fs.rmSync(countDir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
