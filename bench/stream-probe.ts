// A quick A/B probe of svc's chat path on a shared machine, where wall-clock numbers drift with
// the neighbours' load: the CPU time svc's process spends per request (from /proc, which load
// elsewhere changes far less than req/s) next to req/s, and the added time to first token.
//   npx tsx bench/stream-probe.ts [SECONDS] [tput|ns|ttft|pace] [RATE]
// - tput: streams at c=32 against the 0 ms upstream; ns: non-stream then stream, the same way;
// - ttft: streams paced at RATE req/s (default 500) against the 60 ms upstream, direct and
//   through svc, and the difference of their TTFT; pace: the same for non-stream, then stream.
// SVC_BENCH_NO_BUILD=1 runs the dist/ already built; SVC_PROBE_PROFILE=DIR has svc write a CPU
// profile there; SVC_PROBE_TRANSPORT=grpc keeps the gRPC hop inside `svc serve`, and
// SVC_PROBE_TRANSPORT=split runs `svc core` and `svc gateway` as two processes (CPU: both added);
// SVC_PROBE_NODE_ARGS='-r /path/preload.cjs …' adds arguments to svc's node (each process of it).
import fs from 'node:fs';
import { killChildren } from './lib/children';
import { runClient, type ClientResult } from './lib/loadgen';
import { chatBody, directPeer, startSvcPeer, startUpstream } from './lib/peers';

const WARMUP_MS = 2000;

/** CPU time (user + system) the process has used, in ms. */
function processCpuMs(pid: number): number {
  const fields = (fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

function ms(value: number | undefined): string {
  return value === undefined ? '—' : value.toFixed(2);
}

async function main(): Promise<void> {
  const durationMs = Number(process.argv[2] ?? 8) * 1000;
  const mode = process.argv[3] ?? 'tput';
  const rate = Number(process.argv[4] ?? 500);
  const profileDir = process.env['SVC_PROBE_PROFILE'];
  const transport = process.env['SVC_PROBE_TRANSPORT'];
  const upstream = await startUpstream(16);
  const svc = await startSvcPeer(
    upstream.baseUrl,
    transport === undefined || transport === 'split' ? {} : { SVC_SERVE_TRANSPORT: transport },
    undefined,
    '',
    [
      ...(profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`]),
      ...(process.env['SVC_PROBE_NODE_ARGS']?.split(' ').filter((a) => a !== '') ?? []),
    ],
    transport === 'split',
  );
  const direct = directPeer(upstream.baseUrl);
  const pids = [svc.pid ?? 0, ...(svc.corePid === null ? [] : [svc.corePid])];
  const cpuMs = (): number => pids.reduce((sum, pid) => sum + processCpuMs(pid), 0);
  // Requests sent in the warm-up and the measured window, which the CPU time covers.
  const sent = (r: ClientResult): number => (r.ok / r.seconds) * (r.seconds + WARMUP_MS / 1000);
  try {
    if (mode === 'tput' || mode === 'ns') {
      for (const stream of mode === 'ns' ? [false, true] : [true]) {
        const before = cpuMs();
        const gatewayBefore = processCpuMs(pids[0] ?? 0);
        const r = await runClient({
          url: svc.url,
          headers: svc.headers,
          body: chatBody(svc.model(0), stream),
          concurrency: 32,
          durationMs,
          warmupMs: WARMUP_MS,
        });
        const cpu = ((cpuMs() - before) / sent(r)) * 1000;
        const gateway = ((processCpuMs(pids[0] ?? 0) - gatewayBefore) / sent(r)) * 1000;
        const split = pids.length > 1 ? ` (gateway ${gateway.toFixed(0)}, core ${(cpu - gateway).toFixed(0)})` : '';
        console.log(
          `svc ${stream ? 'stream' : 'non-stream'} c=32: ${r.requestsPerSecond.toFixed(0)} req/s, p50 ${ms(r.latency.p50)} ms, svc CPU ${cpu.toFixed(0)} µs/req${split}, ${r.errors} errors`,
        );
      }
    }
    if (mode === 'ttft' || mode === 'pace') {
      for (const stream of mode === 'pace' ? [false, true] : [true]) {
        const spec = { rate, durationMs, warmupMs: WARMUP_MS };
        const d = await runClient({
          ...spec,
          url: direct.url,
          headers: direct.headers,
          body: chatBody(direct.model(60), stream),
        });
        const before = cpuMs();
        const s = await runClient({
          ...spec,
          url: svc.url,
          headers: svc.headers,
          body: chatBody(svc.model(60), stream),
        });
        const cpu = ((cpuMs() - before) / ((rate * (durationMs + WARMUP_MS)) / 1000)) * 1000;
        const first = (r: ClientResult): { p50: number; p99: number } => r.ttft ?? r.latency;
        console.log(
          `${stream ? 'stream TTFT' : 'non-stream latency'} @${rate} req/s: direct p50 ${ms(first(d).p50)} p99 ${ms(first(d).p99)} ms; svc p50 ${ms(first(s).p50)} p99 ${ms(first(s).p99)} ms; added p50 ${ms(first(s).p50 - first(d).p50)} p99 ${ms(first(s).p99 - first(d).p99)} ms; svc CPU ${cpu.toFixed(0)} µs/req, ${s.errors} errors`,
        );
      }
    }
  } finally {
    await svc.closeAndCheck().catch((error: unknown) => console.log(`books: ${String(error)}`));
    await upstream.stop();
    killChildren();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
