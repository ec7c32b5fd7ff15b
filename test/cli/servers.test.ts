import assert from 'node:assert/strict';
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

  it('exits with a message naming the key when the configuration file is bad', async () => {
    const run = await runSvc(['core'], {
      SVC_DATABASE_URL: db.url,
      SVC_CONFIG: '/nonexistent/svc.yaml',
      SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
    });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^svc: config file \/nonexistent\/svc\.yaml: cannot be read \(ENOENT\)$/m);
  });
});
