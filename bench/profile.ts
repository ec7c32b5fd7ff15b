// A CPU profile of `svc serve` under load (`npm run bench:profile -- [--stream] [--mcp]
// [--seconds N] [--connections C] [--transport grpc|split]`): the bench's fake upstream and svc (set up
// as the bench sets it up), autocannon at 32 connections (or C; 1 is a call at a time, as
// bench/alone.ts measures), svc run with `--cpu-prof`; then the busy time by where it
// is spent (svc's own folders, each package, Node's internals, GC) and the hottest functions
// (`--transport split`: `svc gateway` and `svc core` as two processes, each profiled).
// The .cpuprofile is kept (open it in Chrome DevTools or speedscope) and its path printed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { autocannon } from './lib/autocannon';
import { killChildren } from './lib/children';
import { chatBody, startSvcPeer, startUpstream } from './lib/peers';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

/** Where a frame's time goes: svc's folder, a package, Node's own code, or a VM bucket. */
function bucketOf(url: string, fn: string): string {
  if (url === '') return fn === '' ? '(anonymous native)' : `(${fn.replace(/[()]/g, '')})`;
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const m = /\/(?:dist\/)?(core|adapters|cli|gen)\/([^/]+)/.exec(url);
  if (m !== null) return `svc ${m[1]}/${m[2]}`;
  return url;
}

function summarise(profile: CpuProfile): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // Start and shutdown are not what is measured: count from the first sample that serves a request
  // (Koa's handleRequest, or nice-grpc's server in the split topology's core) to the last one.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Split, the core's serving is nice-grpc's server calling the services.
  const serving = (id: number): boolean => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (frame?.functionName === 'handleRequest' || frame?.url.includes('nice-grpc/lib/server/') === true) return true;
    }
    return false;
  };
  let first = profile.samples.findIndex((id) => serving(id));
  let last = profile.samples.length - 1;
  while (last > first && !serving(profile.samples[last] as number)) last--;
  if (first === -1) first = 0;
  const self = new Map<number, number>();
  for (let i = first; i <= last; i++) {
    const id = profile.samples[i] as number;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  let total = 0;
  let idle = 0;
  const buckets = new Map<string, number>();
  const functions = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (node === undefined) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    total += us;
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    const bucket = bucketOf(url, functionName);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + us);
    const where =
      url === '' ? '' : ` ${url.replace(/^.*node_modules\//, '').replace(process.cwd() + '/', '')}:${lineNumber + 1}`;
    const fnKey = `${functionName || '(anonymous)'}${where}`;
    functions.set(fnKey, (functions.get(fnKey) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number): string => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
  console.log(
    `\nbusy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s sampled (idle ${pct(idle)} of busy)`,
  );
  console.log('\nself time by where it is spent (share of busy time):');
  for (const [name, us] of [...buckets].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`  ${pct(us)}  ${name}`);
  console.log('\nhottest functions (self time):');
  for (const [name, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 30))
    console.log(`  ${pct(us)}  ${name}`);
}

async function main(): Promise<void> {
  const seconds = Number(arg('--seconds') ?? 10);
  const stream = process.argv.includes('--stream');
  const mcp = process.argv.includes('--mcp');
  const transport = arg('--transport');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-profile-'));
  const upstream = await startUpstream(16);
  const svc = await startSvcPeer(
    upstream.baseUrl,
    transport === undefined || transport === 'split' ? {} : { SVC_SERVE_TRANSPORT: transport },
    undefined,
    '',
    ['--cpu-prof', `--cpu-prof-dir=${dir}`],
    transport === 'split',
  );
  try {
    const auth = { authorization: `Bearer ${svc.key}` };
    const load = mcp
      ? await autocannon({
          url: `${svc.gatewayUrl}/v1/mcp`,
          headers: { ...auth, accept: 'application/json, text/event-stream' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name: 'maps_search_places', arguments: { query: 'داروخانه', limit: 3 } },
          }),
          connections: Number(arg('--connections') ?? 32),
          seconds,
        })
      : await autocannon({
          url: `${svc.gatewayUrl}/v1/openai/chat/completions`,
          headers: auth,
          body: chatBody('svc-0ms', stream),
          connections: Number(arg('--connections') ?? 32),
          seconds,
        });
    console.log(
      `${mcp ? 'mcp tools/call' : stream ? 'chat stream' : 'chat non-stream'}: ${Math.round(load.requestsPerSecond)} req/s, p50 ${load.p50} ms, p99 ${load.p99} ms`,
    );
  } finally {
    await svc.closeAndCheck(mcp ? 460n : undefined).catch((error: unknown) => console.log(`books: ${String(error)}`));
    await upstream.stop();
    killChildren();
  }
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) throw new Error(`svc wrote no profile into ${dir}`);
  // Split, one profile per process (the gateway's has Koa's handleRequest in it).
  for (const file of files) {
    summarise(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as CpuProfile);
    console.log(`\nprofile: ${path.join(dir, file)}`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
