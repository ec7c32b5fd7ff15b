// CPU per answered request of two svc builds side by side (`npx tsx bench/ab-cpu.ts OTHER_CHECKOUT
// [--rounds N] [--seconds S] [--stream | --non-stream] [--grpc | --split] [--b-env K=V,…]`): one fake upstream, `svc serve` from this checkout and from
// OTHER_CHECKOUT (e.g. a worktree of main, built), each loaded in turn (A B, B A, …; bench/lib/ab.ts)
// at 32 connections, non-stream and stream; then the median µs of process CPU per answered request
// (/proc) and req/s of each (`--split`: of both processes, and of the gateway and the core apart).
// Both builds must be built (`npm run build` in each). Both svc's books are checked at the end.
// OTHER_CHECKOUT `.` with `--b-env K=V,…` compares this build against itself with those variables
// set on the second (e.g. `--split --b-env SVC_CORE_TUNNELS=0`: the gateway's tunnel against a call per call).
// bench/build-ab.ts is the same comparison with SQL counts and a choice of connections.
import path from 'node:path';
import { checkBooks, interleave, numberFlag, readingLines, svcSide, type AbReadings } from './lib/ab';
import { killChildren } from './lib/children';
import type * as ownPeers from './lib/peers';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from './lib/peers';

async function main(): Promise<void> {
  const other = process.argv[2];
  if (other === undefined || other.startsWith('--'))
    throw new Error('usage: bench/ab-cpu.ts OTHER_CHECKOUT [--rounds N] [--seconds S]');
  const rounds = numberFlag('--rounds', 4);
  const seconds = numberFlag('--seconds', 4);
  process.env['SVC_BENCH_NO_BUILD'] = '1';
  // The other checkout's bench library starts its own build of svc.
  const otherPeers = (await import(path.resolve(other, 'bench/lib/peers'))) as typeof ownPeers;
  const upstream = await startUpstream(16);
  // `--grpc` keeps the gRPC hop inside `svc serve`; `--split` runs `svc core` and `svc gateway`.
  const serveEnv: NodeJS.ProcessEnv = process.argv.includes('--grpc') ? { SVC_SERVE_TRANSPORT: 'grpc' } : {};
  const split = process.argv.includes('--split');
  const at = process.argv.indexOf('--b-env');
  const bEnv: NodeJS.ProcessEnv = Object.fromEntries(
    (at < 0 ? '' : (process.argv[at + 1] ?? ''))
      .split(',')
      .filter((pair) => pair.includes('='))
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const bName =
    Object.keys(bEnv).length > 0
      ? Object.entries(bEnv)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')
      : undefined;
  const peers: [string, SvcPeer][] = [
    ['this', await startSvcPeer(upstream.baseUrl, serveEnv, undefined, '', [], split)],
    [
      bName ?? path.basename(path.resolve(other)),
      await otherPeers.startSvcPeer(upstream.baseUrl, { ...serveEnv, ...bEnv }, undefined, '', [], split),
    ],
  ];
  const readings = new Map<string, AbReadings>();
  try {
    const only = process.argv.includes('--stream')
      ? ['stream']
      : process.argv.includes('--non-stream')
        ? ['non-stream']
        : undefined;
    for (const kind of only ?? ['non-stream', 'stream']) {
      const body = chatBody('svc-0ms', kind === 'stream');
      const sides = peers.map(([name, peer]) => svcSide(`${name} ${kind}`, peer, { body }));
      for (const [name, r] of await interleave(sides, { rounds, seconds, warmupSeconds: 2 })) readings.set(name, r);
    }
  } finally {
    await checkBooks(peers).finally(async () => {
      await upstream.stop();
      killChildren();
    });
  }
  for (const line of readingLines(readings)) console.log(line);
}

main().catch((error: unknown) => {
  console.error(error);
  killChildren();
  process.exitCode = 1;
});
