import assert from 'node:assert/strict';
import { Metadata } from 'nice-grpc-common';
import { connectCore, type CoreConnection } from '../../adapters/http/core-client';
import { startSvc, type TestSvc } from '../helpers/harness';

const config = (own: string): string => `models:
  svc-pro:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 1 }
  ${own}:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 1 }
`;

/*
 * A gateway (or an internal service) that reaches several cores under one name spreads its calls
 * over all of them, as behind a Kubernetes headless Service: grpc-js resolves the name to every
 * address and the channel balances round-robin instead of pinning to the first (pick_first).
 * Two real cores on one database, told apart by one model each serves alone.
 */
describe('core client: calls spread over every core an address resolves to', function () {
  this.timeout(30_000);
  let first: TestSvc;
  let second: TestSvc;
  let connection: CoreConnection;

  before(async () => {
    first = await startSvc({ config: config('only-first') });
    second = await startSvc({ config: config('only-second'), databaseUrl: first.databaseUrl });
    connection = connectCore(`ipv4:${first.coreAddress},${second.coreAddress}`);
  });
  after(async () => {
    connection.close();
    await second.close();
    await first.close();
  });

  it('answers from both cores, round-robin, with one key valid on both', async () => {
    const { key } = await first.createFundedKey(10);
    const metadata = new Metadata({ authorization: `Bearer ${key}` });
    const served: string[] = [];
    for (let i = 0; i < 12; i += 1) {
      const { models } = await connection.clients.models.listModels({}, { metadata });
      const own = models.map((m) => m.id).find((id) => id.startsWith('only-'));
      served.push(own ?? 'neither');
    }
    const counts = new Map<string, number>();
    for (const core of served) counts.set(core, (counts.get(core) ?? 0) + 1);
    assert.deepEqual([...counts.keys()].sort(), ['only-first', 'only-second'], served.join(' '));
    // Round-robin once both are connected: no core takes more than two-thirds of the calls.
    for (const n of counts.values()) assert.ok(n >= 4, served.join(' '));
    assert.equal(await connection.ready(AbortSignal.timeout(5_000)), true);
  });
});
