import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { usableCpus } from '../../cli/cluster';
import { parseConfig } from '../../core/config/load';
import { workerConfig, workerShare } from '../../core/config/shares';
import { createCore } from '../../core/create-core';
import { mergeSnapshots } from '../../core/metrics/registry';
import { migrate, openStore, type Store } from '../../core/store/db';
import { bookViolations, chargesByClientRequest, readBooks } from '../fault/books';
import { chaosModels, startChaosUpstreams, type ChaosUpstreams } from '../fault/chaos-upstream';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One request on a connection of its own (no keep-alive), so that the primary hands each to the next worker. */
function request(
  port: number,
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: url, agent: false, headers: { ...headers, connection: 'close' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function healthPids(port: number, tries: number): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < tries && pids.size < 2; i += 1) {
    const answer = await request(port, 'GET', '/healthz', {});
    assert.equal(answer.status, 200, answer.body);
    const body = JSON.parse(answer.body) as { status: string; worker?: number; pid?: number };
    assert.equal(body.status, 'ok');
    assert.ok(body.worker === 1 || body.worker === 2, answer.body);
    pids.add(body.pid ?? 0);
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('svc serve --workers: how many, and each limit a share', () => {
  it('counts the CPUs the cgroup allows: the affinity mask capped by cpu.max (v2) or the CFS quota (v1), rounded up', () => {
    const cpus = os.availableParallelism();
    const files = (map: Record<string, string>) => (file: string) => {
      const text = map[file];
      if (text === undefined) throw Object.assign(new Error(`ENOENT ${file}`), { code: 'ENOENT' });
      return text;
    };
    assert.equal(usableCpus(files({})), cpus, 'no cgroup files: the affinity mask');
    assert.equal(usableCpus(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' })), cpus, 'no quota');
    assert.equal(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '100000 100000\n' })), 1, 'one CPU');
    assert.equal(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '50000 100000\n' })), 1, 'half a CPU is one worker');
    assert.equal(usableCpus(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' })), Math.min(cpus, 2), '1.5 CPUs: 2');
    // The process's own cgroup (and its parents) count, not only the root of the mount.
    assert.equal(
      usableCpus(
        files({
          '/proc/self/cgroup': '0::/kubepods/pod1/c1\n',
          '/sys/fs/cgroup/kubepods/pod1/cpu.max': '100000 100000',
        }),
      ),
      1,
    );
    assert.equal(
      usableCpus(
        files({
          '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '100000\n',
          '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n',
        }),
      ),
      1,
      'cgroup v1',
    );
    assert.equal(
      usableCpus(
        files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }),
      ),
      cpus,
      'v1 without a quota',
    );
  });

  it('gives each worker a share of every limit held in memory, never 0, and keeps Redis-held limits whole', () => {
    assert.equal(workerShare(600, 2), 300);
    assert.equal(workerShare(7, 2), 3, 'rounded down: together never more than the limit');
    assert.equal(workerShare(1, 4), 1, 'never 0 (0 turns a limit off)');
    assert.equal(workerShare(0, 4), 0, 'off stays off');
    const config = parseConfig('limits:\n  requests_per_minute: 60\n  tokens_per_minute: 1000\n', {}, 't');
    const memory = workerConfig(config, 2, false);
    assert.equal(memory.limits.requestsPerMinute, 30);
    assert.equal(memory.limits.tokensPerMinute, 500);
    assert.equal(memory.limits.countRequestsPerMinute, 60);
    assert.equal(memory.oauth?.registrationsPerMinute, 15);
    const redis = workerConfig(config, 2, true);
    assert.equal(redis.limits.requestsPerMinute, 60);
    assert.equal(redis.limits.tokensPerMinute, 1000);
    assert.equal(redis.limits.countRequestsPerMinute, 60, 'the counting calls are never in Redis');
    assert.equal(workerConfig(config, 1, false), config, 'one worker: the config as it is');
  });

  it('adds the workers’ metrics up: counters and histograms sum, a gauge takes the largest', () => {
    const h = (counts: number[], sum: number) => ({
      bounds: [0.1, 1],
      counts,
      sum,
      count: counts.reduce((a, b) => a + b),
    });
    const merged = mergeSnapshots([
      [
        { name: 'c', help: 'c', type: 'counter', series: [{ labels: { a: '1' }, value: 3n }] },
        { name: 'g', help: 'g', type: 'gauge', series: [{ labels: {}, value: 5 }] },
        { name: 'h', help: 'h', type: 'histogram', series: [{ labels: {}, histogram: h([1, 0, 2], 3) }] },
      ],
      [
        {
          name: 'c',
          help: 'c',
          type: 'counter',
          series: [
            { labels: { a: '1' }, value: 4n },
            { labels: { a: '2' }, value: 1 },
          ],
        },
        { name: 'g', help: 'g', type: 'gauge', series: [{ labels: {}, value: 5 }] },
        { name: 'h', help: 'h', type: 'histogram', series: [{ labels: {}, histogram: h([0, 1, 1], 2) }] },
      ],
    ]);
    const byName = new Map(merged.map((f) => [f.name, f]));
    assert.deepEqual(
      byName.get('c')?.series.map((s) => [s.labels['a'], s.value]),
      [
        ['1', 7n],
        ['2', 1],
      ],
    );
    assert.deepEqual(
      byName.get('g')?.series.map((s) => s.value),
      [5],
      'a database gauge is not doubled',
    );
    assert.deepEqual(byName.get('h')?.series[0]?.histogram, { bounds: [0.1, 1], counts: [1, 1, 3], sum: 5, count: 5 });
  });
});

describe('svc serve --workers 2 (real processes on one port)', function () {
  this.timeout(240_000);
  const LIMIT = 60;
  const ADMIN_TOKEN = 'workers-admin-token-0123456789';
  let database: TestDatabase;
  let store: Store;
  let svc: SvcProcess | undefined;
  let dir: string;
  let httpPort: number;
  let metricsPort: number;
  let accountId: string;
  let meteredKey: string;
  let limitedKey: string;
  let pids: Set<number>;
  let upstreams: ChaosUpstreams;

  before(async () => {
    // Slow streams take 8 pieces 300 ms apart: they are still running when SIGTERM arrives.
    upstreams = await startChaosUpstreams({ pieceMs: 300, pieces: 8 });
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-workers-'));
    // Calls in flight per key: each worker holds a share (half of 64). The primary hands a new
    // connection to whichever worker is free first, so under load one worker may take most of
    // the 24 concurrent calls below: the default (32, 16 per worker) refused some of them by
    // chance (429 `rate_limit_exceeded`) on a loaded machine.
    const configText = `${chaosModels(upstreams, 60_000)}limits:\n  requests_per_minute: ${LIMIT}\n  concurrent_per_key: 64\n`;
    const configFile = path.join(dir, 'svc.yaml');
    fs.writeFileSync(configFile, configText);
    const core = createCore({
      config: parseConfig(configText, {}, 'test'),
      store,
      logger: pino({ level: 'silent' }),
      adminToken: undefined,
    });
    const account = await core.accounts.create('workers');
    accountId = account.id;
    meteredKey = (await core.keys.create({ accountId, name: 'metered' })).secret;
    limitedKey = (await core.keys.create({ accountId, name: 'limited' })).secret;
    await core.deps.wallet.topUp({ accountId, amount: 10_000_000n, reference: 'test' });
    core.stop();
    httpPort = await freePort();
    metricsPort = await freePort();
    svc = await spawnSvc(
      ['serve', '--workers', '2'],
      {
        SVC_DATABASE_URL: database.url,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_METRICS_ADDR: `127.0.0.1:${metricsPort}`,
        SVC_CONFIG: configFile,
        SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      },
      'svc is ready',
      180_000,
    );
  });
  after(async () => {
    if (svc !== undefined) await svc.stop(5000);
    await upstreams.close();
    await store.close();
    await database.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('logs one ready line from the primary, naming two workers, and answers on one port from two pids', async () => {
    const ready = svc!
      .output()
      .split('\n')
      .filter((line) => line.includes('"svc is ready"'));
    assert.equal(ready.length, 1, svc!.output());
    const line = JSON.parse(ready[0] ?? '{}') as { workers?: number; pids?: number[]; worker?: number };
    assert.equal(line.workers, 2);
    assert.equal(line.worker, undefined, 'from the primary');
    // The test migrated the database already; a worker never migrates, the primary did before forking.
    assert.doesNotMatch(svc!.output(), /"worker":\d[^\n]*"database migrated"/);
    pids = await healthPids(httpPort, 60);
    assert.equal(pids.size, 2, 'two processes answered');
    assert.ok(!pids.has(svc!.child.pid ?? -1), 'the workers, not the primary');
    assert.deepEqual([...pids].sort(), [...(line.pids ?? [])].sort());
  });

  it('keeps exact books for concurrent metered calls from one wallet across both workers', async () => {
    const before = await readBooks(store);
    const balanceBefore = before.wallets.find((w) => w.account_id === accountId)?.balance ?? 0n;
    const N = 24;
    const answers = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        request(
          httpPort,
          'POST',
          '/v1/openai/chat/completions',
          {
            authorization: `Bearer ${meteredKey}`,
            'content-type': 'application/json',
            'x-request-id': `req_workers_${i}`,
          },
          JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: `[f:ok] [t:w${i}] say something` }] }),
        ),
      ),
    );
    for (const a of answers) assert.equal(a.status, 200, a.body);
    const shown = answers.map((a) => BigInt(String(a.headers['x-svc-cost'])));
    for (const cost of shown) assert.ok(cost > 0n);
    const books = await readBooks(store);
    assert.deepEqual(bookViolations(books, Date.now()), []);
    const charges = chargesByClientRequest(books);
    for (let i = 0; i < N; i += 1)
      assert.deepEqual(
        charges.get(`${accountId}/req_workers_${i}`),
        [shown[i]],
        `call ${i} charged once, what it showed`,
      );
    const balance = books.wallets.find((w) => w.account_id === accountId)?.balance ?? 0n;
    assert.equal(balance, balanceBefore - shown.reduce((a, b) => a + b, 0n));
  });

  it(`admits no more than ${LIMIT} requests a minute for one key across both workers`, async () => {
    const started = Date.now();
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch += 1) {
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          request(
            httpPort,
            'POST',
            '/v1/openai/chat/completions',
            { authorization: `Bearer ${limitedKey}`, 'content-type': 'application/json' },
            JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: '[f:ok] hi' }] }),
          ),
        ),
      );
      statuses.push(...answers.map((a) => a.status));
    }
    const admitted = statuses.filter((s) => s === 200).length;
    const refused = statuses.filter((s) => s === 429).length;
    assert.equal(admitted + refused, statuses.length, `only 200 or 429: ${statuses.join(',')}`);
    // The buckets refill at LIMIT per minute in all: what the test's own duration allows on top.
    const refill = Math.floor(((Date.now() - started) / 60_000) * LIMIT) + 1;
    assert.ok(admitted <= LIMIT + refill, `${admitted} admitted, the limit is ${LIMIT} (+${refill} refilled)`);
    assert.ok(admitted >= LIMIT / 2, `${admitted} admitted: each worker admits its share`);
  });

  it('serves one SVC_METRICS_ADDR, and GET /metrics on the HTTP port, with both workers’ charges added up', async () => {
    const books = await readBooks(store);
    const charged = books.entries.filter((e) => e.kind === 'charge').reduce((sum, e) => sum - e.amount, 0n);
    const scrape = async (port: number, headers: Record<string, string>): Promise<bigint> => {
      const text = await request(port, 'GET', '/metrics', headers);
      assert.equal(text.status, 200, text.body);
      const families = text.body.split('\n').filter((l) => l.startsWith('# TYPE '));
      assert.equal(families.length, new Set(families).size, 'each family once');
      const series = [...text.body.matchAll(/^svc_credits_charged_total(?:\{[^}]*\})? (\d+)$/gm)];
      assert.ok(series.length > 0, text.body.slice(0, 2000));
      return series.reduce((sum, m) => sum + BigInt(m[1] ?? '0'), 0n);
    };
    // Every charge so far was made by one worker or the other: the sum holds them all.
    assert.equal(await scrape(metricsPort, {}), charged);
    // Whichever worker answers the HTTP port's scrape, it shows both.
    for (let i = 0; i < 2; i += 1)
      assert.equal(await scrape(httpPort, { authorization: `Bearer ${ADMIN_TOKEN}` }), charged);
  });

  it('replaces a worker that dies, and logs it', async () => {
    const victim = [...pids][0] ?? 0;
    process.kill(victim, 'SIGKILL');
    await until('the replacement', () => /"worker replaced"/.test(svc!.output()));
    assert.match(svc!.output(), /"worker exited unexpectedly; starting another"/);
    const now = await healthPids(httpPort, 60);
    assert.equal(now.size, 2, 'two processes answer again');
    assert.ok(!now.has(victim), 'the dead one is gone');
    pids = now;
  });

  it('drains every worker on SIGTERM to the primary: running streams finish and are charged once, exit 0', async () => {
    // Four streams on four connections: round-robin gives each worker some.
    const streams = Array.from({ length: 4 }, (_, i) =>
      request(
        httpPort,
        'POST',
        '/v1/openai/chat/completions',
        { authorization: `Bearer ${meteredKey}`, 'content-type': 'application/json', 'x-request-id': `req_drain_${i}` },
        JSON.stringify({
          model: 'svc-pro',
          stream: true,
          stream_options: { include_usage: true },
          messages: [{ role: 'user', content: `[f:slow] [t:d${i}] tell me` }],
        }),
      ),
    );
    await until('the streams to start', () => (upstreams.received.get('chat:slow') ?? 0) === 4, 30_000);
    const code = await svc!.stop(60_000);
    const answers = await Promise.all(streams);
    for (const a of answers) {
      assert.equal(a.status, 200, a.body);
      assert.match(a.body, /data: \[DONE\]/, 'the stream finished');
      assert.match(a.body, /"usage":\{"prompt_tokens":\d+/);
    }
    assert.equal(code, 0, svc!.output());
    for (const pid of pids) assert.ok(!alive(pid), `worker ${pid} exited`);
    const output = svc!.output();
    assert.equal((output.match(/"msg":"worker stopped"/g) ?? []).length, 2, output);
    svc = undefined;
    const books = await readBooks(store);
    assert.deepEqual(bookViolations(books, Date.now()), []);
    assert.deepEqual(
      books.holds.filter((h) => h.status === 'held'),
      [],
      'no pending hold',
    );
    const charges = chargesByClientRequest(books);
    for (let i = 0; i < 4; i += 1)
      assert.equal(charges.get(`${accountId}/req_drain_${i}`)?.length, 1, `stream ${i} charged once`);
  });
});
