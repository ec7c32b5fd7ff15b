import { callerIds } from '../../adapters/http/request';
import assert from 'node:assert/strict';
import { callCore, type CallMeta } from '../../adapters/http/core-client';
import { consoleDb } from '../../core/console/tables';
import { isSvcError } from '../../core/errors';
import { startSvc, type TestSvc } from '../helpers/harness';

// Issue 20, point 9: over gRPC, a SignIn's `client_address` is believed only from the console
// adapter (which proves itself with x-svc-adapter-token); anyone else is limited by its own address.
describe('console sign-in over gRPC: whose address the limits count (SQLite/MariaDB)', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  const direct: CallMeta = { authorization: undefined, ids: callerIds('req_stated_address') };

  async function subjects(): Promise<string[]> {
    const rows = await consoleDb(svc.store).selectFrom('console_sign_in_failures').select('subject').execute();
    return rows.map((r) => r.subject).sort();
  }

  function operatorGuess(meta: CallMeta, i: number): Promise<string> {
    return callCore(meta, (o) =>
      svc.connection.clients.console.signInOperator(
        { adminToken: `guess ${i}`, clientAddress: `198.51.100.${i + 1}` },
        o,
      ),
    ).then(
      () => 'signed_in',
      (e: unknown) => (isSvcError(e) ? e.code : 'other'),
    );
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

  it('12 wrong operator tokens from 12 stated addresses, no adapter credential: the 6th on is refused', async () => {
    const codes: string[] = [];
    for (let i = 0; i < 12; i++) codes.push(await operatorGuess(direct, i));
    assert.deepEqual(codes, [...Array(5).fill('invalid_credentials'), ...Array(7).fill('rate_limited')]);
    assert.deepEqual(await subjects(), Array(5).fill('operator:127.0.0.1'));
  });

  it('a user SignIn without the adapter credential counts the caller, not the stated address', async () => {
    await assert.rejects(
      callCore(direct, (o) =>
        svc.connection.clients.console.signIn(
          { email: 'nobody@example.com', password: 'a guess', clientAddress: '203.0.113.7' },
          o,
        ),
      ),
      (e: unknown) => isSvcError(e) && e.code === 'invalid_credentials',
    );
    assert.deepEqual(await subjects(), ['email:nobody@example.com', 'ip:127.0.0.1']);
  });

  it('the console adapter, proving itself, has its stated browser address believed', async () => {
    const adapter: CallMeta = { ...direct, adapterToken: svc.core.adapterToken ?? '' };
    const codes: string[] = [];
    for (let i = 0; i < 6; i++) codes.push(await operatorGuess(adapter, i));
    assert.deepEqual(codes, Array(6).fill('invalid_credentials'));
    assert.deepEqual(await subjects(), Array.from({ length: 6 }, (_, i) => `operator:198.51.100.${i + 1}`).sort());
    // A wrong credential is no credential.
    assert.equal(await operatorGuess({ ...direct, adapterToken: 'not-the-adapter-token' }, 100), 'invalid_credentials');
    assert.ok((await subjects()).includes('operator:127.0.0.1'));
  });
});
