import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { runSvc, svcJson } from './run-svc';

describe('svc core + svc gateway --core', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  const running: SvcProcess[] = [];

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    for (const proc of running.reverse()) await proc.stop();
    await db?.drop();
  });

  it('serves a key made by the CLI while the admin commands keep working on the same database, and stops on SIGTERM', async () => {
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: db.url, SVC_LOG_LEVEL: 'info' };
    await svcJson(['migrate'], env);
    const account = await svcJson(['account', 'create', '--name', 'split'], env);
    const accountId = String(account['id']);
    const key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);

    const grpcAddr = `127.0.0.1:${await freePort()}`;
    const core = await spawnSvc(['core'], { ...env, SVC_GRPC_ADDR: grpcAddr }, 'core listening (gRPC)');
    running.push(core);

    // SVC_CORE_ADDR points nowhere: the gateway must use --core.
    const httpPort = await freePort();
    const gateway = await spawnSvc(
      ['gateway', '--core', grpcAddr],
      { ...env, SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`, SVC_CORE_ADDR: '127.0.0.1:9' },
      'gateway listening (HTTP)',
    );
    running.push(gateway);

    const res = await fetch(`http://127.0.0.1:${httpPort}/v1/openai/models`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { object: string }).object, 'list');

    const topup = await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '5000'], env);
    assert.equal(topup['balance'], 5000);

    assert.equal(await gateway.stop(), 0, gateway.output());
    assert.equal(await core.stop(), 0, core.output());
    assert.ok(!core.output().includes(key) && !gateway.output().includes(key), 'no process logs the key');
  });

  it('svc serve with SVC_SERVE_TRANSPORT=grpc and SVC_GRPC_ADDR=unix:PATH: the adapters reach the core over the Unix socket', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-unix-'));
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: db.url, SVC_LOG_LEVEL: 'info' };
    await svcJson(['migrate'], env);
    const account = await svcJson(['account', 'create', '--name', 'unix'], env);
    const accountId = String(account['id']);
    const key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '100000'], env);
    const socket = path.join(dir, 'core.sock');
    const httpPort = await freePort();
    const serve = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_GRPC_ADDR: `unix:${socket}`,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_SERVE_TRANSPORT: 'grpc',
      },
      'svc is ready',
    );
    running.push(serve);
    try {
      assert.ok(fs.statSync(socket).isSocket(), 'the core listens on the socket');
      assert.match(serve.output(), /"transport":"grpc"/);
      assert.equal((await fetch(`http://127.0.0.1:${httpPort}/readyz`)).status, 200);
      const res = await fetch(`http://127.0.0.1:${httpPort}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hello over a socket' }] }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const cost = Number(res.headers.get('x-svc-cost'));
      assert.ok(cost > 0);
      const wallet = await svcJson(['wallet', 'show', '--account', accountId], env);
      assert.equal(wallet['balance'], 100000 - cost);
      assert.equal(await serve.stop(), 0, serve.output());
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('svc serve with SVC_CORE_THREAD=1: the core in a worker thread bills a call, /metrics shows both threads, SIGTERM stops both', async () => {
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: db.url, SVC_LOG_LEVEL: 'info' };
    await svcJson(['migrate'], env);
    const accountId = String((await svcJson(['account', 'create', '--name', 'thread'], env))['id']);
    const key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '100000'], env);
    const httpPort = await freePort();
    const metricsPort = await freePort();
    const serve = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_CORE_THREAD: '1',
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_METRICS_ADDR: `127.0.0.1:${metricsPort}`,
      },
      'svc is ready',
    );
    running.push(serve);
    const base = `http://127.0.0.1:${httpPort}`;
    const res = await fetch(`${base}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hello from the main thread' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const cost = Number(res.headers.get('x-svc-cost'));
    assert.ok(cost > 0);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    // The gateway's own series and the core thread's, in one scrape.
    assert.match(
      metrics,
      /^svc_http_requests_total\{method="POST",route="\/v1\/openai\/chat\/completions",status="200"\} 1$/m,
    );
    assert.match(metrics, new RegExp(`^svc_credits_charged_total\\{[^}]*\\} ${cost}$`, 'm'));
    assert.match(metrics, /^svc_metrics_collect_errors 0$/m);
    assert.equal(await serve.stop(), 0, serve.output());
    assert.match(serve.output(), /"coreThread":true/);
    const wallet = await svcJson(['wallet', 'show', '--account', accountId], env);
    assert.equal(wallet['balance'], 100000 - cost);
    assert.equal(wallet['held'], 0);
  });

  it('exits with a message naming the key when the configuration file is bad', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-cli-config-'));
    try {
      const file = path.join(dir, 'svc.yaml');
      fs.writeFileSync(file, 'tools:\n  maps_search_places:\n    provider: sandbox\n    price: -460\n');
      const env = { SVC_DATABASE_URL: db.url, SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}` };
      const bad = await runSvc(['core'], { ...env, SVC_CONFIG: file });
      assert.equal(bad.code, 1);
      assert.match(
        bad.stderr,
        /^svc: config tools\.maps_search_places\.price: must be a non-negative integer \(got -460\)$/m,
      );
      const missing = await runSvc(['serve'], { ...env, SVC_CONFIG: path.join(dir, 'missing.yaml') });
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /^svc: config file .*missing\.yaml: cannot be read \(ENOENT\)$/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
