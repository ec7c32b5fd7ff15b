import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { createChannel, createClient, Metadata } from 'nice-grpc';
import pino from 'pino';
import YAML from 'yaml';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import { parseConfig } from '../../core/config/load';
import { createCore } from '../../core/create-core';
import { openStore, type Store } from '../../core/store/db';
import { createTestDatabase, requireMysql, suiteDialect, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, SVC_BIN, type SvcProcess } from '../helpers/processes';
import { bookViolations, readBooks } from '../fault/books';
import { PROMPT_TOKENS, startChaosUpstreams, type ChaosUpstreams } from '../fault/chaos-upstream';
import { checkCharges, prng, sendMixed, sendTool, type Sent, type TrafficMix } from '../fault/traffic';

/*
 * deploy/compose.yaml's topology without containers: the processes its services run, wired as it
 * wires them — `svc migrate` once, to completion, before any core; two `svc core` on one MariaDB
 * sharing limits through one Redis; two `svc gateway`, each calling its own core; clients spread
 * over both gateways as the load balancer spreads them — with the very config file it mounts
 * (deploy/svc.yaml) and its environment, the secrets' values passed as its entrypoint exports
 * them. The fault test's traffic (test/fault/traffic.ts: chat, streams and the three tools against
 * upstreams that fail, answer slowly and cut streams; clients that abort and retry) runs through
 * it while core-1 is stopped with SIGTERM and started again (a rolling update), and the fault
 * test's invariants are checked on the rows afterwards.
 */

const ROOT = path.join(__dirname, '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const REQUESTS = Number(process.env['SVC_DEPLOY_REQUESTS'] ?? 400);
const CONCURRENCY = 16;
const ADMIN = 'compose-topology-admin-token-0123';
const PIECES = 8;
const REDIS_URL = process.env['SVC_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
// No `hang`: the deploy config gives upstreams their production timeouts (120 s for the model).
const MIX: TrafficMix = {
  chatFates: [
    ['ok', 60],
    ['slow', 12],
    ['error', 10],
    ['cut', 10],
  ],
  toolFates: [
    ['ok', 65],
    ['slow', 15],
    ['error', 12],
  ],
  abortRate: 0.07,
  retryRate: 0.05,
};

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  configs?: { source: string; target: string }[];
  depends_on?: Record<string, { condition: string }>;
}

/** deploy/compose.yaml with its anchors and `<<` merges resolved, as Compose reads it. */
function readCompose(): { services: Record<string, ComposeService>; configs: Record<string, { file: string }> } {
  return YAML.parse(fs.readFileSync(path.join(DEPLOY, 'compose.yaml'), 'utf8'), { merge: true }) as ReturnType<
    typeof readCompose
  >;
}

/** Compose's `${NAME:-default}` with nothing set: the default. */
function composeDefault(value: string): string {
  return value.replace(
    /\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}/g,
    (_all, fallback: string | undefined) => fallback ?? '',
  );
}

async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

describe('deploy/compose.yaml topology without containers: 2 cores, 2 gateways, MariaDB, Redis, its config', function () {
  this.timeout(300_000);
  let database: TestDatabase;
  let store: Store;
  let upstreams: ChaosUpstreams;
  const procs: SvcProcess[] = [];

  before(async function () {
    // Its database is MariaDB whatever the pass: CI runs it once, in the MySQL pass.
    if (suiteDialect() !== 'mysql') {
      process.stdout.write('      note: runs in the MySQL pass (SVC_TEST_DATABASE=mysql)\n');
      this.skip();
    }
    requireMysql(this);
    if (!(await redisAnswers(REDIS_URL))) {
      process.stdout.write(`      note: skipped: no Redis answers at ${REDIS_URL} (SVC_TEST_REDIS_URL)\n`);
      this.skip();
    }
    database = await createTestDatabase('mysql');
    store = openStore(database.url);
    upstreams = await startChaosUpstreams({ pieceMs: 40, pieces: PIECES });
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.stop(15_000)));
    await upstreams?.close();
    await store?.close();
    await database?.drop();
  });

  it('migrates once before the cores, serves through both gateways across a rolling restart, and keeps every wallet invariant', async () => {
    const compose = readCompose();
    const services = Object.entries(compose.services);
    const cores = services.filter(([, s]) => s.command?.[0] === 'core');
    const gateways = services.filter(([, s]) => s.command?.[0] === 'gateway');
    const migrateJob = services.find(([, s]) => s.command?.[0] === 'migrate');
    assert.equal(cores.length, 2, 'compose runs two cores');
    assert.equal(gateways.length, 2, 'compose runs two gateways');
    assert.ok(migrateJob !== undefined, 'compose runs svc migrate');
    for (const [name, core] of cores)
      assert.equal(core.depends_on?.[migrateJob[0]]?.condition, 'service_completed_successfully', name);

    // The config file compose mounts at SVC_CONFIG, read from where compose reads it.
    const configFor = (service: ComposeService): string => {
      const mount = service.configs?.find((c) => c.target === service.environment?.['SVC_CONFIG']);
      assert.ok(mount !== undefined, 'the config is mounted at SVC_CONFIG');
      return path.resolve(DEPLOY, compose.configs[mount.source]!.file);
    };
    const configFile = configFor(cores[0]![1]);
    for (const [, s] of [...cores, ...gateways, migrateJob]) assert.equal(configFor(s), configFile);

    // Compose's environment for a service, with what only containers have replaced: the
    // secrets (the entrypoint exports them from /run/secrets), the service names (here
    // 127.0.0.1 ports), and the upstreams (the chaos fakes; the real ones are the internet).
    const secrets = {
      SVC_DATABASE_URL: database.url,
      SVC_ADMIN_TOKEN: ADMIN,
      UPSTREAM_API_KEY: 'chaos',
      NESHAN_API_KEY: 'neshan-test-key',
    };
    const upstreamEnv = {
      UPSTREAM_BASE_URL: upstreams.chatBaseUrl,
      UPSTREAM_MODEL: 'chaos-1',
      SEARXNG_BASE_URL: upstreams.toolBaseUrl('searxng'),
      NESHAN_BASE_URL: upstreams.toolBaseUrl('neshan'),
      TOROB_BASE_URL: upstreams.toolBaseUrl('torob'),
    };
    const envOf = async (service: ComposeService): Promise<NodeJS.ProcessEnv> => {
      const env: NodeJS.ProcessEnv = {};
      for (const [key, value] of Object.entries(service.environment ?? {})) env[key] = composeDefault(String(value));
      assert.match(env['SVC_REDIS_URL'] ?? '', /^redis:\/\/redis:/, 'compose shares limits through its Redis');
      env['SVC_REDIS_URL'] = REDIS_URL;
      env['SVC_CONFIG'] = configFile;
      env['SVC_METRICS_ADDR'] = `127.0.0.1:${await freePort()}`;
      // No collector here: tracing stays off rather than exporting into nothing.
      delete env['OTEL_EXPORTER_OTLP_ENDPOINT'];
      return { ...env, ...upstreamEnv, ...secrets };
    };

    // The prices the checks expect, from the same file (a chat call: the fakes' fixed prompt and answer).
    const fileText = fs.readFileSync(configFile, 'utf8');
    parseConfig(fileText, { ...upstreamEnv, ...secrets }, configFile);
    const raw = YAML.parse(fileText) as {
      models: Record<string, { price: { input_per_1m: number; output_per_1m: number } }>;
      tools: Record<string, { price: number }>;
    };
    const tariff = raw.models['svc-pro']!.price;
    const prices = {
      chat:
        (BigInt(PROMPT_TOKENS) * BigInt(tariff.input_per_1m) +
          BigInt(PIECES) * BigInt(tariff.output_per_1m) +
          999_999n) /
        1_000_000n,
      tools: Object.fromEntries(Object.entries(raw.tools).map(([name, t]) => [name, BigInt(t.price)])),
    };

    // migrate: the one-shot job, to completion, before any core.
    const migrated = await promisify(execFile)(process.execPath, [SVC_BIN, ...migrateJob[1].command!, '--json'], {
      env: { ...process.env, SVC_FROM_SOURCE: '1', ...(await envOf(migrateJob[1])) },
    });
    assert.ok(migrated.stdout.trim().startsWith('{'), `svc migrate --json printed ${migrated.stdout}`);

    // The accounts, through the same database (the admin commands' path).
    const local = createCore({
      config: parseConfig(fileText, { ...upstreamEnv, ...secrets }, configFile),
      store,
      logger: pino({ level: 'silent' }),
      adminToken: undefined,
    });
    const accounts: { id: string; keys: string[] }[] = [];
    for (let i = 0; i < 4; i++) {
      const account = await local.accounts.create(`compose-${i}`);
      const keys = [];
      for (let k = 0; k < 2; k++) keys.push((await local.keys.create({ accountId: account.id, name: `k${k}` })).secret);
      await local.deps.wallet.topUp({ accountId: account.id, amount: 50_000_000n, reference: 'compose test' });
      accounts.push({ id: account.id, keys });
    }
    const mapsPrice = prices.tools['maps_search_places']!;
    const SCARCE_BALANCE = 5n * mapsPrice + 200n;
    const scarce = await local.accounts.create('scarce');
    const scarceKey = (await local.keys.create({ accountId: scarce.id, name: 'scarce' })).secret;
    await local.deps.wallet.topUp({ accountId: scarce.id, amount: SCARCE_BALANCE, reference: 'compose test' });
    local.stop();

    // The cores, then each gateway on the core compose names for it.
    const coreAddr = new Map<string, string>();
    const coreEnv = new Map<string, NodeJS.ProcessEnv>();
    const startCore = (name: string): Promise<SvcProcess> =>
      spawnSvc([...cores.find(([n]) => n === name)![1].command!], coreEnv.get(name)!, 'core listening');
    const running = new Map<string, SvcProcess>();
    for (const [name, service] of cores) {
      coreAddr.set(name, `127.0.0.1:${await freePort()}`);
      coreEnv.set(name, { ...(await envOf(service)), SVC_GRPC_ADDR: coreAddr.get(name)! });
      const proc = await startCore(name);
      running.set(name, proc);
      procs.push(proc);
      assert.match(proc.output(), /rate limits shared through Redis/, `${name} shares its limits through Redis`);
    }
    const gatewayUrls: string[] = [];
    for (const [name, service] of gateways) {
      const args = [...service.command!];
      const target = args[args.indexOf('--core') + 1]!.split(':')[0]!;
      assert.ok(coreAddr.has(target), `${name} calls a core of the topology (${target})`);
      args[args.indexOf('--core') + 1] = coreAddr.get(target)!;
      const port = await freePort();
      procs.push(
        await spawnSvc(args, { ...(await envOf(service)), SVC_HTTP_ADDR: `127.0.0.1:${port}` }, 'gateway listening'),
      );
      gatewayUrls.push(`http://127.0.0.1:${port}`);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      assert.equal(ready.status, 200, `${name} is ready (its core answers)`);
    }
    const [restarted, steady] = [cores[0]![0], cores[1]![0]];

    // Wallet reads through the core that keeps running: balance − held never below zero.
    const walletClient = createClient(WalletServiceDefinition, createChannel(coreAddr.get(steady)!));
    const adminMeta = Metadata({ authorization: `Bearer ${ADMIN}` });
    let polling = true;
    let reads = 0;
    const negative: string[] = [];
    const poller = (async () => {
      while (polling) {
        for (const id of [...accounts.map((a) => a.id), scarce.id]) {
          const { wallet } = await walletClient.getWallet({ accountId: id }, { metadata: adminMeta });
          reads += 1;
          if (wallet !== undefined && wallet.balance - wallet.held < 0n)
            negative.push(`${id}: ${wallet.balance} − ${wallet.held}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const seed = Number(process.env['SVC_FAULT_SEED'] ?? 19);
    const random = prng(seed);
    const sent: Sent[] = [];
    const events: string[] = [];
    let admitted = -1;
    let drainedExit: number | null | undefined;
    let finished = 0;
    let next = 0;
    const milestones = new Map<number, () => Promise<void>>([
      [
        Math.floor(REQUESTS * 0.2),
        async () => {
          const results = await Promise.all(
            Array.from({ length: 30 }, (_, n) =>
              sendTool(gatewayUrls[n % 2]!, scarceKey, `req_scarce_${n}`, 'maps_search_places', `tea [t:sc${n}]`).catch(
                () => 'transport' as const,
              ),
            ),
          );
          admitted = results.filter((r) => r === 'success').length;
          events.push(`scarce burst: ${admitted} of 30 admitted`);
        },
      ],
      [
        Math.floor(REQUESTS * 0.35),
        async () => {
          // A rolling update's stop: SIGTERM, the drain, exit 0; then the new one starts.
          drainedExit = await running.get(restarted)!.stop(15_000);
          events.push(`${restarted} stopped (SIGTERM, exit ${drainedExit}) after ${finished} requests`);
          const proc = await startCore(restarted);
          running.set(restarted, proc);
          procs.push(proc);
          events.push(`${restarted} started again after ${finished} requests`);
          // Its gateway takes traffic again once /readyz says its core answers (compose's
          // healthcheck and Kubernetes' readiness probe gate it the same way).
          const gateway = gatewayUrls[cores.findIndex(([n]) => n === restarted)]!;
          const since = Date.now();
          while (
            (await fetch(`${gateway}/readyz`).then(
              (r) => r.status,
              () => 0,
            )) !== 200
          ) {
            assert.ok(Date.now() - since < 120_000, `${gateway} not ready within 120 s of its core's restart`);
            await new Promise((r) => setTimeout(r, 250));
          }
          events.push(`its gateway ready ${Date.now() - since} ms after the restart`);
        },
      ],
    ]);
    let faults: Promise<void> = Promise.resolve();
    let faultsRunning = 0;
    let calmFrom = Infinity;
    const CALM = Math.floor(REQUESTS * 0.2);
    const worker = async (): Promise<void> => {
      while (next < REQUESTS || milestones.size > 0 || faultsRunning > 0 || next < calmFrom + CALM) {
        const i = next++;
        await sendMixed({ i, random, accounts, gatewayUrls, requestIdPrefix: `req_compose_${seed}_`, mix: MIX, sent });
        finished += 1;
        const milestone = milestones.get(finished);
        if (milestone !== undefined) {
          milestones.delete(finished);
          faultsRunning += 1;
          faults = faults.then(milestone).finally(() => {
            faultsRunning -= 1;
            if (faultsRunning === 0 && milestones.size === 0) calmFrom = next;
          });
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await faults;
    polling = false;
    await poller;

    // Settles still on their way land within moments; nothing is left to the reaper (the
    // deploy config's hold TTL is ten minutes, and a drained core leaves no hold behind).
    let books = await readBooks(store);
    for (let waited = 0; books.holds.some((h) => h.status === 'held') && waited < 15_000; waited += 250) {
      await new Promise((r) => setTimeout(r, 250));
      books = await readBooks(store);
    }

    assert.equal(drainedExit, 0, `${restarted} drained and exited 0 on SIGTERM`);
    assert.deepEqual(bookViolations(books, Date.now()), []);
    assert.deepEqual(
      books.holds.filter((h) => h.status === 'held'),
      [],
      'no pending hold',
    );
    assert.deepEqual(negative, [], 'no read saw balance − held < 0');
    assert.ok(reads > 0, 'wallets were read during the load');
    const calm = sent.filter((s) => Number(s.tag.slice(1)) >= calmFrom);
    const calmSuccess = [0, 1].map(
      (g) => calm.filter((s) => Number(s.tag.slice(1)) % 2 === g && s.outcome === 'success').length,
    );
    assert.ok(
      calmSuccess.every((n) => n > 0),
      `after the restart, calls succeeded through both gateways: ${calmSuccess.join(', ')} of ${calm.length}`,
    );
    for (const [name, proc] of running)
      assert.ok(proc.child.exitCode === null && proc.child.signalCode === null, `${name} is running`);

    const { problems, expectedTotal } = checkCharges(sent, books, upstreams, prices);
    assert.deepEqual(problems, []);
    const busy = new Set(accounts.map((a) => a.id));
    const total = books.entries
      .filter((e) => e.kind === 'charge' && busy.has(e.account_id))
      .reduce((sum, e) => sum - e.amount, 0n);
    assert.ok(total >= expectedTotal, `charges ${total} cover the successes ${expectedTotal}`);

    assert.ok(admitted >= 0 && BigInt(admitted) <= SCARCE_BALANCE / mapsPrice, `admitted ${admitted}`);
    const scarceWallet = books.wallets.find((w) => w.account_id === scarce.id);
    assert.equal(scarceWallet?.balance, SCARCE_BALANCE - BigInt(admitted) * mapsPrice);

    const success = sent.filter((s) => s.outcome === 'success').length;
    if (process.env['SVC_FAULT_REPORT'] === '1')
      process.stdout.write(
        `${JSON.stringify({ seed, requests: sent.length, success, reads, afterRestart: calmSuccess, events }, null, 2)}\n`,
      );
    assert.ok(success > sent.length / 3, `enough calls succeeded: ${success} of ${sent.length}`);
  });
});
