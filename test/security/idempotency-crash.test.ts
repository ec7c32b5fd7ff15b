import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { createAccountService } from '../../core/accounts/service';
import { createKeyService } from '../../core/keys/service';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createWalletService } from '../../core/wallet/service';
import { DEFAULT_USAGE, startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { expectedCost, testConfig } from '../openai/fixture';

const TTL_SECONDS = 2;
const CALLS = 6;
const FUNDS = 100_000n;
const COST = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);

interface Replica {
  readonly process: SvcProcess;
  readonly http: string;
}

/**
 * Issue 20 point 3: a `svc serve` killed (SIGKILL) with idempotent calls in flight. Their
 * Idempotency-Keys are not stuck for 24 hours: once the hold TTL has run out, a retry on any
 * replica runs (and is charged once), its repeat replays it, and the dead calls' holds are freed.
 */
describe('security: an Idempotency-Key whose first request died with its core', function () {
  this.timeout(180_000);
  let upstream: FakeUpstream;
  let database: TestDatabase;
  let store: Store;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const replicas: SvcProcess[] = [];

  async function serve(): Promise<Replica> {
    const port = await freePort();
    const process = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_HTTP_ADDR: `127.0.0.1:${port}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
      },
      'svc is ready',
    );
    replicas.push(process);
    return { process, http: `http://127.0.0.1:${port}` };
  }

  before(async () => {
    upstream = await startFakeUpstream();
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-idem-'));
    const config = path.join(dir, 'svc.yaml');
    fs.writeFileSync(config, testConfig(upstream.baseUrl, `limits:\n  hold_ttl_seconds: ${TTL_SECONDS}\n`));
    env = { SVC_DATABASE_URL: database.url, SVC_CONFIG: config, SVC_ADMIN_TOKEN: 'idem-admin-token-0123456789abcdef' };
  });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await store?.close();
    await database?.drop();
    await upstream?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('after kill -9 with 6 idempotent calls in flight, a retry on either replica runs once the hold TTL has passed', async () => {
    const accountId = (await createAccountService({ store, now: Date.now }).create('crash')).id;
    await createWalletService({ store, now: Date.now }).topUp({ accountId, amount: FUNDS });
    const { secret } = await createKeyService({ store, now: Date.now }).create({ accountId, name: 'idem' });
    const client = (r: Replica): OpenAI =>
      new OpenAI({ baseURL: `${r.http}/v1/openai`, apiKey: secret, maxRetries: 0, timeout: 60_000 });
    const ask = (r: Replica, i: number) =>
      client(r).chat.completions.create(
        { model: 'svc-pro', messages: [{ role: 'user', content: `question ${i}` }] },
        { headers: { 'Idempotency-Key': `crash-${i}` } },
      );

    const doomed = await serve();
    const survivor = await serve();
    upstream.enqueue(...Array.from({ length: CALLS }, () => ({ kind: 'hang' as const })));
    const inFlight = Array.from({ length: CALLS }, (_, i) => ask(doomed, i).then(() => 'answered', String));
    for (let i = 0; upstream.requests.length < CALLS; i++) {
      assert.ok(i < 3000, 'the calls reached the upstream');
      await new Promise((r) => setTimeout(r, 10));
    }
    const pending = await store.db
      .selectFrom('idempotency_records')
      .select('state')
      .where('account_id', '=', accountId)
      .execute();
    assert.deepEqual(
      pending.map((p) => p.state),
      Array.from({ length: CALLS }, () => 'pending'),
    );

    doomed.process.child.kill('SIGKILL');
    await new Promise((r) => doomed.process.child.once('exit', r));
    const killedAt = Date.now();
    for (const outcome of await Promise.all(inFlight)) assert.notEqual(outcome, 'answered');
    const restarted = await serve();
    // Past the hold TTL, the time a dead core's claims and holds outlive it.
    while (Date.now() < killedAt + TTL_SECONDS * 1000 + 250) await new Promise((r) => setTimeout(r, 50));

    const answers = await Promise.all(
      Array.from({ length: CALLS }, (_, i) => ask(i % 2 === 0 ? survivor : restarted, i)),
    );
    for (const answer of answers) assert.equal(answer.usage?.completion_tokens, DEFAULT_USAGE.completion_tokens);
    // The same key again, on the other replica: the stored answer, no second run.
    const replays = await Promise.all(
      Array.from({ length: CALLS }, (_, i) => ask(i % 2 === 0 ? restarted : survivor, i)),
    );
    assert.deepEqual(
      replays.map((r) => r.id),
      answers.map((a) => a.id),
    );
    assert.equal(upstream.requests.length, 2 * CALLS, 'each retry ran once upstream');

    // The dead calls' holds expire and are freed by the live cores' reapers; one charge per key.
    let wallet = await createWalletService({ store, now: Date.now }).get(accountId);
    for (let i = 0; wallet.held !== 0n; i++) {
      assert.ok(i < 3000, 'the holds of the dead calls were freed');
      await new Promise((r) => setTimeout(r, 10));
      wallet = await createWalletService({ store, now: Date.now }).get(accountId);
    }
    assert.equal(wallet.balance, FUNDS - BigInt(CALLS) * COST);
    const holds = await store.db
      .selectFrom('holds')
      .select(['status'])
      .where('account_id', '=', accountId)
      .orderBy('status')
      .execute();
    assert.deepEqual(
      holds.map((h) => h.status),
      [...Array.from({ length: CALLS }, () => 'expired'), ...Array.from({ length: CALLS }, () => 'settled')],
    );
  });
});
