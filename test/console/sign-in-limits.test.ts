import { callerIds } from '../../adapters/http/request';
import assert from 'node:assert/strict';
import { callCore } from '../../adapters/http/core-client';
import { createWorkGate } from '../../core/console/work-gate';
import { consoleDb } from '../../core/console/tables';
import { isSvcError } from '../../core/errors';
import { startSvc, type TestSvc } from '../helpers/harness';
import { createConsoleUser } from './helpers';

/** Settles every promise; tells the checked (a wrong password) from the refused (rate-limited). */
async function outcomes(calls: Promise<unknown>[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const result of await Promise.allSettled(calls)) {
    const code = result.status === 'fulfilled' ? 'signed_in' : isSvcError(result.reason) ? result.reason.code : 'other';
    counts.set(code, (counts.get(code) ?? 0) + 1);
  }
  return counts;
}

// Issue 20, point 6: the attempt is counted before the password is hashed, so a burst of
// concurrent guesses gets no more checks than the limit allows.
describe('console sign-in limits under concurrent attempts (SQLite/MariaDB)', function () {
  this.timeout(120_000);
  let svc: TestSvc;

  function signIn(email: string, password: string): Promise<unknown> {
    return callCore({ authorization: undefined, ids: callerIds('req_burst') }, (o) =>
      svc.connection.clients.console.signIn({ email, password, clientAddress: '' }, o),
    );
  }

  async function failures(prefix: string): Promise<number> {
    const rows = await consoleDb(svc.store)
      .selectFrom('console_sign_in_failures')
      .select('seq')
      .where('subject', 'like', `${prefix}%`)
      .execute();
    return rows.length;
  }

  before(async () => {
    svc = await startSvc();
  });
  beforeEach(async () => {
    await consoleDb(svc.store).deleteFrom('console_sign_in_failures').execute();
  });
  after(async () => {
    await svc?.close();
  });

  it('30 concurrent wrong passwords for one email: 5 are checked, the rest refused as rate-limited', async () => {
    const user = await createConsoleUser(svc, { name: 'Burst', email: 'burst@example.com', balance: 0n, keyName: 'k' });
    const counts = await outcomes(Array.from({ length: 30 }, (_, i) => signIn(user.email, `wrong password ${i}`)));
    const checked = counts.get('invalid_credentials') ?? 0;
    assert.equal(checked, 5, JSON.stringify([...counts]));
    assert.equal(counts.get('rate_limited'), 30 - checked, JSON.stringify([...counts]));
    assert.equal(await failures('email:burst@'), checked, 'one failure recorded per checked attempt');
    // Locked now, even for the right password.
    await assert.rejects(signIn(user.email, user.password), (e: unknown) => isSvcError(e) && e.code === 'rate_limited');
  });

  it('40 concurrent unknown emails from one address: 20 are hashed, the rest refused', async () => {
    const counts = await outcomes(Array.from({ length: 40 }, (_, i) => signIn(`nobody${i}@example.com`, 'a guess')));
    const checked = counts.get('invalid_credentials') ?? 0;
    assert.equal(checked, 20, JSON.stringify([...counts]));
    assert.equal(counts.get('rate_limited'), 40 - checked, JSON.stringify([...counts]));
    assert.equal(await failures('ip:'), checked);
  });

  it('a right password counts no failure', async () => {
    const user = await createConsoleUser(svc, { name: 'Fine', email: 'fine@example.com', balance: 0n, keyName: 'k' });
    for (let i = 0; i < 2; i++) await signIn(user.email, user.password);
    assert.equal(await failures('email:fine@'), 0);
    assert.equal(await failures('ip:'), 0);
  });
});

describe('work gate (bounds concurrent scrypt)', () => {
  it('runs at most `concurrency` at once, queues up to `queue`, refuses the rest as rate-limited', async () => {
    const gate = createWorkGate({ concurrency: 2, queue: 3 });
    let running = 0;
    let peak = 0;
    const releases: (() => void)[] = [];
    const work = (): Promise<number> =>
      new Promise<number>((resolve) => {
        running++;
        peak = Math.max(peak, running);
        releases.push(() => {
          running--;
          resolve(1);
        });
      });
    const runs = Array.from({ length: 7 }, () => gate.run(work));
    const settled = Promise.allSettled(runs);
    // Release one at a time; each frees a slot for the next in line.
    for (let released = 0; released < 5; released++) {
      while (releases.length === 0) await new Promise((r) => setImmediate(r));
      assert.ok(running <= 2);
      releases.shift()?.();
    }
    const results = await settled;
    assert.equal(peak, 2);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 5);
    const refused = results.filter((r) => r.status === 'rejected');
    assert.equal(refused.length, 2);
    for (const r of refused) assert.ok(isSvcError(r.reason) && r.reason.code === 'rate_limited');
  });
});
