// The fast path against the translated path, interleaved (`npx tsx bench/fast-path-ab.ts
// [--rounds N] [--seconds S]`): one fake upstream, two `svc serve` (SVC_FAST_PATH=1 and 0), and
// autocannon at 32 connections on each in turn (A B, B A, …, streams and non-streams; bench/lib/ab.ts),
// so that a machine whose load drifts (a shared one) weighs on both alike; then the median of
// each and their ratio. Both svc's books are checked at the end. `npm run bench` stays the judge
// of goals; this only isolates what the pass-through changes.
import { checkBooks, comparison, interleave, numberFlag, svcSide, type AbReadings } from './lib/ab';
import { killChildren } from './lib/children';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from './lib/peers';

async function main(): Promise<void> {
  const rounds = numberFlag('--rounds', 4);
  const seconds = numberFlag('--seconds', 3);
  const upstream = await startUpstream(16);
  const peers: [string, SvcPeer][] = [
    ['fast', await startSvcPeer(upstream.baseUrl, { SVC_FAST_PATH: '1' })],
    ['translated', await startSvcPeer(upstream.baseUrl, { SVC_FAST_PATH: '0' })],
  ];
  const readings = new Map<string, AbReadings>();
  try {
    for (const kind of ['stream', 'non-stream']) {
      const body = chatBody('svc-0ms', kind === 'stream');
      const sides = peers.map(([name, peer]) => svcSide(`${kind} ${name}`, peer, { body }));
      for (const [name, r] of await interleave(sides, { rounds, seconds, warmupSeconds: 1 })) readings.set(name, r);
    }
  } finally {
    await checkBooks(peers).finally(async () => {
      await upstream.stop();
      killChildren();
    });
  }
  for (const kind of ['stream', 'non-stream'])
    console.log(
      comparison(kind, ['fast', readings.get(`${kind} fast`)], ['translated', readings.get(`${kind} translated`)]),
    );
}

main().catch((error: unknown) => {
  console.error(error);
  killChildren();
  process.exitCode = 1;
});
