// The chat peers that the bench measures side by side, each a server process of its own in front
// of the same fake upstream: the upstream itself (direct), a bare passthrough proxy, Portkey's
// open-source gateway, and svc as `svc serve` runs it. All are started and read the same way, so
// their throughput, latency and memory compare.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { svcJson } from '../../test/cli/run-svc';
import { freePort, spawnSvc, type SvcProcess } from '../../test/helpers/processes';
import { migrate, openStore } from '../../core/store/db';
import { ROOT, startChild, startTsServer, track, type Child } from './children';

const exec = promisify(execFile);

export interface Peer {
  /** Short name: direct, proxy, portkey, svc. */
  readonly name: string;
  /** What the report calls it. */
  readonly variant: string;
  /** POST endpoint for chat completions. */
  readonly url: string;
  readonly headers: Record<string, string>;
  /** The model name that reaches the fake upstream with `latencyMs` before its first byte. */
  model(latencyMs: number): string;
  /** The server process whose memory is read; null for the upstream itself. */
  readonly pid: number | null;
  /** Every server process of the peer (CPU is read over them and their children); default `[pid]`. */
  readonly pids?: readonly number[];
  /**
   * A peer of more than one process (the split topology): each process with the variant its own
   * rows are reported under (its RSS, CPU per request, event-loop delay), beside the peer's sums.
   */
  readonly processes?: readonly { readonly variant: string; readonly pid: number }[];
  close(): Promise<void>;
}

export const VARIANTS = {
  direct: 'direct to upstream',
  proxy: 'bare passthrough proxy',
  portkey: 'Portkey gateway 1.15.2',
  svc: 'svc (auth, hold, settle, usage)',
  svcTranslated: 'svc, SVC_FAST_PATH=0 (translated path)',
  svcGrpc: 'svc, SVC_SERVE_TRANSPORT=grpc',
  svcThread: 'svc, SVC_CORE_THREAD=1',
  svcSplit: 'svc split: svc core + svc gateway (gRPC, SVC_CORE_TUNNELS=4)',
  svcSplitDirect: 'svc split, SVC_CORE_TUNNELS=0 (a gRPC call per call)',
  svcSplitGateway: 'svc split: the svc gateway process',
  svcSplitCore: 'svc split: the svc core process',
  svcWorkers: 'svc serve --workers 2',
  proxyWorkers: 'bare passthrough proxy, 2 workers',
} as const;

/** The upstream latencies that peers' models are set up for. */
export const LATENCIES_MS = [0, 60] as const;

const fakeModel = (ms: number): string => `fake-${ms}ms`;

export function chatBody(model: string, stream: boolean): string {
  return JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to the benchmark, in a dozen words or so.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/** The fake upstream (bench/lib/upstream.ts) in its own process. */
export async function startUpstream(chunks: number): Promise<Child & { baseUrl: string }> {
  const child = await startTsServer('bench/lib/upstream.ts', ['--chunks', String(chunks)]);
  return { ...child, baseUrl: child.url };
}

export function directPeer(upstreamBaseUrl: string): Peer {
  return {
    name: 'direct',
    variant: VARIANTS.direct,
    url: `${upstreamBaseUrl}/chat/completions`,
    headers: { 'content-type': 'application/json' },
    model: fakeModel,
    pid: null,
    close: () => Promise.resolve(),
  };
}

export async function startProxyPeer(upstreamBaseUrl: string, workers = 1): Promise<Peer> {
  const child = await startTsServer('bench/lib/proxy.ts', [upstreamBaseUrl, String(workers)]);
  return {
    name: 'proxy',
    variant: workers === 1 ? VARIANTS.proxy : VARIANTS.proxyWorkers,
    url: `${child.url}/chat/completions`,
    headers: { 'content-type': 'application/json' },
    model: fakeModel,
    pid: child.pid,
    close: async () => void (await child.stop()),
  };
}

const PORTKEY_DIR = path.join(ROOT, 'bench/.peers/portkey');
// Newer hono and its Node adapters break Portkey's streaming: pinned as Portkey's own lock had them.
const PORTKEY_PACKAGE = {
  private: true,
  dependencies: { '@portkey-ai/gateway': '1.15.2' },
  overrides: { '@hono/node-server': '1.13.5', '@hono/node-ws': '1.2.0', hono: '4.9.7' },
};

function installedVersion(dir: string, name: string): string | null {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? null;
  } catch {
    return null;
  }
}

/** Installs Portkey 1.15.2 from npm under bench/.peers/portkey (git-ignored), unless it is there. */
export async function ensurePortkey(): Promise<string> {
  const wanted: Record<string, string> = {
    '@portkey-ai/gateway': '1.15.2',
    ...PORTKEY_PACKAGE.overrides,
  };
  const current = Object.entries(wanted).every(([name, v]) => installedVersion(PORTKEY_DIR, name) === v);
  if (!current) {
    fs.mkdirSync(PORTKEY_DIR, { recursive: true });
    fs.writeFileSync(path.join(PORTKEY_DIR, 'package.json'), `${JSON.stringify(PORTKEY_PACKAGE, null, 2)}\n`);
    console.log('  installing @portkey-ai/gateway 1.15.2 into bench/.peers/portkey');
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    await exec(npm, ['install', '--no-audit', '--no-fund', '--no-package-lock'], {
      cwd: PORTKEY_DIR,
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  }
  return path.join(PORTKEY_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');
}

/** Portkey's gateway as its README runs it (Node, headless), routed to the fake upstream. */
export async function startPortkeyPeer(upstreamBaseUrl: string): Promise<Peer> {
  const script = await ensurePortkey();
  const port = await freePort();
  const child = await startChild(process.execPath, [script, `--port=${port}`, '--headless'], {
    env: { NODE_ENV: 'production' },
    cwd: PORTKEY_DIR,
    port,
  });
  return {
    name: 'portkey',
    variant: VARIANTS.portkey,
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer bench',
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': upstreamBaseUrl,
    },
    model: fakeModel,
    pid: child.pid,
    close: async () => void (await child.stop()),
  };
}

let build: Promise<NodeJS.ProcessEnv> | null = null;

/**
 * Builds dist/ once per bench run, so svc runs compiled as `svc serve` does when installed; when
 * the build fails (someone's change in progress) svc runs from its sources through tsx instead.
 */
export function svcBuild(): Promise<NodeJS.ProcessEnv> {
  if (process.env['SVC_BENCH_NO_BUILD'] === '1') return Promise.resolve({ SVC_FROM_SOURCE: '0' });
  build ??= exec('npm', ['run', 'build'], { cwd: ROOT, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }).then(
    () => ({ SVC_FROM_SOURCE: '0' }),
    (error: unknown) => {
      console.log(
        `  npm run build failed, svc runs from its sources: ${error instanceof Error ? error.message : String(error)}`,
      );
      return { SVC_FROM_SOURCE: '1' };
    },
  );
  return build;
}

export const SVC_COST_PER_CALL = 45n;

/** The request log goes to a pipe that nobody needs to keep: drop it instead of buffering it. */
function quiet(svc: SvcProcess): void {
  svc.child.stdout?.removeAllListeners('data');
  svc.child.stdout?.resume();
  svc.child.stderr?.removeAllListeners('data');
  svc.child.stderr?.resume();
}
const SVC_START_BALANCE = 1_000_000_000_000n;

export interface SvcPeer extends Peer {
  readonly process: SvcProcess;
  /** http://127.0.0.1:PORT (the OpenAI API under /v1/openai, MCP at /v1/mcp). */
  readonly gatewayUrl: string;
  readonly key: string;
  /** The `svc core` process of the split topology; null when one process serves. */
  readonly corePid: number | null;
  /**
   * Stops svc (gracefully: cut calls settle), then checks its books (and, given `toolCost`, that
   * every ok tool call cost exactly that); resolves the ok calls. Rejects when svc had already
   * exited: what was measured since then was not svc.
   */
  closeAndCheck(toolCost?: bigint): Promise<number>;
  /** The peer's database (`sqlite:FILE`), to read its books while it runs. */
  readonly databaseUrl: string;
  /** Runs an `svc … --json` command against this svc's database and config (another account, a key). */
  cli(args: readonly string[]): Promise<Record<string, unknown>>;
}

/**
 * svc as `svc serve` runs it, in its own process on a temp SQLite file, set up through the CLI
 * (`svc migrate`, `account create`, `key create`, `wallet topup`, all `--json`), with one model
 * per upstream latency (`svc-0ms` → `fake-0ms`, …) priced so that the fake's usage costs 45. The
 * upstream URL may be any placeholder when only MCP is measured. `extraModels` (YAML entries
 * under `models:`) adds models of a scenario's own, priced the same; `nodeArgs` go to node
 * (`--cpu-prof`, heap flags); `extraLimits` (YAML lines under `limits:`) sets a limit of the
 * scenario's own. `split` runs the topology a scaled-out deployment runs instead: `svc
 * core` and `svc gateway` as two processes, the gateway calling the core over loopback gRPC (the
 * peer's `pid` is then the gateway's, `corePid` the core's, `processes` both, each under its variant).
 */
export async function startSvcPeer(
  upstreamBaseUrl: string,
  serveEnv: NodeJS.ProcessEnv = {},
  variant: string = VARIANTS.svc,
  extraModels = '',
  nodeArgs: readonly string[] = [],
  split = false,
  extraLimits = '',
): Promise<SvcPeer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const configPath = path.join(dir, 'svc.yaml');
  const models = LATENCIES_MS.map(
    (ms) => `  svc-${ms}ms:
    provider: openai
    base_url: ${upstreamBaseUrl}
    api_key: bench
    upstream_model: ${fakeModel(ms)}
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 128000
    max_output_tokens: 4096
`,
  ).join('');
  fs.writeFileSync(
    configPath,
    `models:\n${models}${extraModels}limits:\n  requests_per_minute: 1000000000\n  concurrent_per_key: 0\n  concurrent_per_account: 0\n${extraLimits}`,
  );
  const dbFile = path.join(dir, 'bench.db');
  const env: NodeJS.ProcessEnv = {
    ...(await svcBuild()),
    SVC_DATABASE_URL: `sqlite:${dbFile}`,
    SVC_CONFIG: configPath,
  };
  let accountId: string;
  let key: string;
  let svc: SvcProcess;
  // Split: the core in a process of its own, stopped after the gateway that calls it.
  let core: SvcProcess | undefined;
  let port: number;
  try {
    await svcJson(['migrate'], env);
    accountId = String((await svcJson(['account', 'create', '--name', 'bench'], env))['id']);
    key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', String(SVC_START_BALANCE)], env);
    port = await freePort();
    const grpcAddr = `127.0.0.1:${await freePort()}`;
    const common: NodeJS.ProcessEnv = {
      ...env,
      SVC_HTTP_ADDR: `127.0.0.1:${port}`,
      SVC_GRPC_ADDR: grpcAddr,
      // As in production: one info line per request.
      SVC_LOG_LEVEL: 'info',
      // One process unless a variant asks for workers (the default follows the machine's CPUs).
      SVC_WORKERS: '1',
      ...serveEnv,
    };
    if (split) {
      core = await spawnSvc(['core'], common, 'core listening (gRPC)', 60_000, nodeArgs);
      track(core.child);
      quiet(core);
      svc = await spawnSvc(
        ['gateway'],
        { ...common, SVC_CORE_ADDR: grpcAddr },
        'gateway listening',
        60_000,
        nodeArgs,
      ).catch(async (error: unknown) => {
        await core?.stop(10_000);
        throw error;
      });
    } else svc = await spawnSvc(['serve'], common, 'svc is ready', 60_000, nodeArgs);
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  track(svc.child);
  const pid = svc.child.pid ?? 0;
  quiet(svc);
  const closeAndCheck = async (toolCost?: bigint): Promise<number> => {
    const exited = (p: SvcProcess | undefined): string | null => {
      if (p === undefined) return null;
      const { exitCode, signalCode } = p.child;
      return exitCode !== null || signalCode !== null ? String(exitCode ?? signalCode) : null;
    };
    const early = exited(svc) ?? exited(core);
    const code = await svc.stop(30_000);
    // The core last: the calls the gateway cut settle there.
    const coreCode = core === undefined ? 0 : await core.stop(30_000);
    const store = openStore(`sqlite:${dbFile}`);
    try {
      await migrate(store);
      const wallet = await store.db
        .selectFrom('wallets')
        .select(['balance', 'held'])
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      if (wallet.held !== 0n) throw new Error(`svc: ${wallet.held} credits still held after it stopped`);
      const rows = await store.db
        .selectFrom('usage_records')
        .select(['status', 'cost', 'kind', 'account_id'])
        .execute();
      // The bench account's records against its wallet (a scenario may add accounts of its own).
      const recorded = rows.filter((r) => r.account_id === accountId).reduce((sum, r) => sum + r.cost, 0n);
      if (SVC_START_BALANCE - wallet.balance !== recorded)
        throw new Error(`svc: wallet charged ${SVC_START_BALANCE - wallet.balance}, usage records say ${recorded}`);
      const chats = rows.filter((r) => r.status === 'ok' && r.kind === 'chat');
      if (chats.some((r) => r.cost !== SVC_COST_PER_CALL))
        throw new Error(`svc: an ok chat call was not charged exactly ${SVC_COST_PER_CALL}`);
      if (toolCost !== undefined && rows.some((r) => r.status === 'ok' && r.kind === 'tool' && r.cost !== toolCost))
        throw new Error(`svc: an ok tool call was not charged exactly ${toolCost}`);
      // Whatever was measured after an exit nobody asked for was measured against nothing.
      const what = split ? 'svc gateway or svc core' : 'svc serve';
      if (early !== null) throw new Error(`${what} exited by itself (${early}) before the bench stopped it`);
      if (code !== 0) throw new Error(`${split ? 'svc gateway' : 'svc serve'} exited with ${String(code)}`);
      if (coreCode !== 0) throw new Error(`svc core exited with ${String(coreCode)}`);
      return rows.filter((r) => r.status === 'ok').length;
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  return {
    name: 'svc',
    variant,
    url: `http://127.0.0.1:${port}/v1/openai/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    model: (ms) => `svc-${ms}ms`,
    pid,
    // CPU is read over both processes of the split topology.
    ...(core?.child.pid !== undefined
      ? {
          pids: [pid, core.child.pid],
          processes: [
            {
              variant: variant === VARIANTS.svcSplit ? VARIANTS.svcSplitGateway : `${variant}: the gateway process`,
              pid,
            },
            {
              variant: variant === VARIANTS.svcSplit ? VARIANTS.svcSplitCore : `${variant}: the core process`,
              pid: core.child.pid,
            },
          ],
        }
      : {}),
    process: svc,
    close: async () => void (await closeAndCheck()),
    closeAndCheck,
    cli: (args) => svcJson([...args], env),
    databaseUrl: `sqlite:${dbFile}`,
    gatewayUrl: `http://127.0.0.1:${port}`,
    key,
    corePid: core?.child.pid ?? null,
  };
}
