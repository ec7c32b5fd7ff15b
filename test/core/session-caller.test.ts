import assert from 'node:assert/strict';
import { Metadata, Status } from 'nice-grpc';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleDb } from '../../core/console/tables';
import { createConsoleUser, type ConsoleUser } from '../console/helpers';

/** The gRPC status of a call (OK when it succeeds), and its answer. */
async function status<T>(call: Promise<T>): Promise<{ code: Status; value?: T }> {
  try {
    return { code: Status.OK, value: await call };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'number') throw error;
    return { code };
  }
}

const as = (authorization: string) => ({ metadata: new Metadata({ authorization }) });

/**
 * A console session is a caller of the ordinary services (issue 17, point 4): a user session acts
 * on its own account only, whatever account or key id it names; an operator session acts like the
 * admin token; an ended session is nobody.
 */
describe('core: a console session calls the ordinary services (SQLite/MariaDB)', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let alice: ConsoleUser;
  let bob: ConsoleUser;
  let asAlice: { metadata: Metadata };
  let asOperator: { metadata: Metadata };

  before(async () => {
    svc = await startSvc();
    alice = await createConsoleUser(svc, {
      name: 'Alice',
      email: 'alice-caller@example.com',
      balance: 5_000n,
      keyName: 'a',
    });
    bob = await createConsoleUser(svc, { name: 'Bob', email: 'bob-caller@example.com', balance: 7_000n, keyName: 'b' });
    const c = svc.connection.clients.console;
    const signed = await c.signIn({ email: alice.email, password: alice.password, clientAddress: '' });
    asAlice = as(`Session ${signed.sessionToken}`);
    const op = await c.signInOperator({ adminToken: svc.adminToken, clientAddress: '' });
    asOperator = as(`Session ${op.sessionToken}`);
  });
  after(async () => {
    await svc?.close();
  });

  it("KeyService: a user session lists, creates and manages its own keys, and never reaches another account's", async () => {
    const keys = svc.connection.clients.keys;
    const own = await keys.listKeys({ accountId: bob.accountId }, asAlice);
    assert.deepEqual(
      own.keys.map((k) => k.accountId),
      [alice.accountId],
      'the named account is ignored: the session lists its own',
    );
    const created = await keys.createKey({ accountId: '', name: 'from a session', scope: '' }, asAlice);
    assert.equal(created.key?.accountId, alice.accountId);
    assert.equal(
      (await status(keys.createKey({ accountId: bob.accountId, name: 'x', scope: '' }, asAlice))).code,
      Status.PERMISSION_DENIED,
    );
    // Each call's refusal is handled as it is made (no rejection waits unobserved).
    for (const got of await Promise.all(
      [
        keys.revokeKey({ keyId: bob.keyId }, asAlice),
        keys.rollKey({ keyId: bob.keyId }, asAlice),
        keys.updateKeyCaps(
          { keyId: bob.keyId, capDaily: 1n, removeCapDaily: false, removeCapMonthly: false, removeCapTotal: false },
          asAlice,
        ),
        keys.updateKeyLimits({ keyId: bob.keyId, allowedModels: { names: ['svc-pro'] } }, asAlice),
      ].map((call) => status(call as Promise<unknown>)),
    ))
      assert.equal(got.code, Status.NOT_FOUND, "another account's key looks like no key");
    const bobKey = await svc.core.keys.get(bob.keyId);
    assert.equal(bobKey.revokedAt, null);
    assert.equal(bobKey.capDaily, null);
    // Its own key: a session may raise its caps (a key may not raise its own).
    await keys.updateKeyCaps(
      { keyId: alice.keyId, capDaily: 10n, removeCapDaily: false, removeCapMonthly: false, removeCapTotal: false },
      asAlice,
    );
    const raised = await keys.updateKeyCaps(
      { keyId: alice.keyId, removeCapDaily: true, removeCapMonthly: false, removeCapTotal: false },
      asAlice,
    );
    assert.equal(raised.key?.capDaily, undefined);
    const revoked = await keys.revokeKey({ keyId: created.key?.id ?? '' }, asAlice);
    assert.ok(revoked.key?.revokedAt !== undefined);
  });

  it('KeyService.UpdateKey and GetKey: a session edits its own key (on the activity list); a key may not extend its own life', async () => {
    const keys = svc.connection.clients.keys;
    const later = new Date(Date.now() + 7 * 86_400_000);
    const edited = await keys.updateKey(
      { keyId: alice.keyId, name: 'renamed', expiresAt: later, removeExpiry: false },
      asAlice,
    );
    assert.equal(edited.key?.name, 'renamed');
    assert.equal(edited.key?.expiresAt?.getTime(), later.getTime());
    const detail = await keys.getKey({ keyId: alice.keyId }, asAlice);
    assert.equal(detail.events[0]?.kind, 'edited');
    assert.match(detail.events[0]?.detail ?? '', /label “a” → “renamed”; expiry never → /);
    assert.ok(detail.lineage.some((k) => k.id === alice.keyId));
    // Each call's refusal is handled as it is made (no rejection waits unobserved).
    for (const got of await Promise.all(
      [
        keys.getKey({ keyId: bob.keyId }, asAlice),
        keys.updateKey({ keyId: bob.keyId, name: 'mine', removeExpiry: true }, asAlice),
      ].map((call) => status(call as Promise<unknown>)),
    ))
      assert.equal(got.code, Status.NOT_FOUND);
    assert.equal((await svc.core.keys.get(bob.keyId)).name, 'b');
    const markup = await status(keys.updateKey({ keyId: alice.keyId, name: '<b>x</b>', removeExpiry: false }, asAlice));
    assert.equal(markup.code, Status.INVALID_ARGUMENT);

    // A manage key of the account: may shorten its own expiry, not remove or lengthen it.
    const manage = await svc.core.keys.create({ accountId: alice.accountId, name: 'm', scope: 'all,manage' });
    const asManage = as(`Bearer ${manage.secret}`);
    const soon = new Date(Date.now() + 86_400_000);
    await keys.updateKey({ keyId: manage.key.id, expiresAt: soon, removeExpiry: false }, asManage);
    for (const change of [{ removeExpiry: true }, { expiresAt: later, removeExpiry: false }])
      assert.equal(
        (await status(keys.updateKey({ keyId: manage.key.id, ...change }, asManage))).code,
        Status.PERMISSION_DENIED,
      );
    assert.equal((await svc.core.keys.get(manage.key.id)).expiresAt?.getTime(), soon.getTime());
    // What a key does is not the console's: nothing on the activity list.
    const events = (await keys.getKey({ keyId: manage.key.id }, asAlice)).events;
    assert.deepEqual(events, []);
  });

  it('WalletService, UsageService, AccountService: a user session reads its own account only', async () => {
    const { wallet, usage, accounts } = svc.connection.clients;
    assert.equal((await wallet.getWallet({ accountId: bob.accountId }, asAlice)).wallet?.accountId, alice.accountId);
    const ledger = await wallet.listLedger({ accountId: bob.accountId, limit: 10 }, asAlice);
    assert.ok(ledger.entries.length > 0);
    assert.ok(ledger.entries.every((e) => e.accountId === alice.accountId));
    assert.equal((await accounts.getAccount({ accountId: bob.accountId }, asAlice)).account?.id, alice.accountId);
    assert.equal(
      (await status(usage.listUsage({ filter: { accountId: bob.accountId }, pageSize: 10, pageToken: '' }, asAlice)))
        .code,
      Status.PERMISSION_DENIED,
    );
    assert.equal((await usage.listUsage({ pageSize: 10, pageToken: '' }, asAlice)).records.length, 0);
    const bogus = usage.listUsage({ filter: { status: "ok' or 1=1" }, pageSize: 10, pageToken: '' }, asAlice);
    assert.equal((await status(bogus)).code, Status.INVALID_ARGUMENT);
    const summary = await usage.getUsageSummary({ filter: { status: 'ok' } }, asAlice);
    assert.deepEqual([summary.totalRequests, summary.keyTotals], [0n, []]);
  });

  it('operator-only calls stay operator-only: a user session is refused, an operator session admitted', async () => {
    const { wallet, accounts } = svc.connection.clients;
    const topUp = { accountId: alice.accountId, amount: 100n, reference: 'session test', requestId: '' };
    assert.equal((await status(wallet.topUp(topUp, asAlice))).code, Status.PERMISSION_DENIED);
    assert.equal((await status(accounts.createAccount({ name: 'by a user' }, asAlice))).code, Status.PERMISSION_DENIED);
    assert.equal((await svc.wallet(alice.accountId)).balance, 5_000n);

    const once = { ...topUp, accountId: bob.accountId, requestId: 'operator-topup-1' };
    const done = await wallet.topUp(once, asOperator);
    assert.equal(done.wallet?.balance, 7_100n);
    assert.equal((await wallet.topUp(once, asOperator)).wallet?.balance, 7_100n, 'retried: credited once');
    const audit = await consoleDb(svc.store)
      .selectFrom('console_audit')
      .select(['action', 'detail'])
      .where('account_id', '=', bob.accountId)
      .execute();
    assert.deepEqual(audit, [
      {
        action: 'top_up',
        detail: '100 toman, reference “session test”, balance after 7,100 (request operator-topup-1)',
      },
    ]);
    assert.equal((await wallet.getWallet({ accountId: bob.accountId }, asOperator)).wallet?.accountId, bob.accountId);
    const keys = await svc.connection.clients.keys.listKeys({ accountId: bob.accountId }, asOperator);
    assert.deepEqual(
      keys.keys.map((k) => k.id),
      [bob.keyId],
    );
    // With no account named, an operator session is asked for one (it has none of its own).
    assert.equal((await status(wallet.getWallet({ accountId: '' }, asOperator))).code, Status.INVALID_ARGUMENT);
  });

  it('AccountService: the operator lists, creates (with a sign-in, audited) and reads audit entries; a user session may not', async () => {
    const { accounts } = svc.connection.clients;
    const found = await accounts.listAccounts({ query: 'bob-caller@', pageToken: '' }, asOperator);
    assert.deepEqual(
      found.accounts.map((a) => [a.account?.id, a.account?.email]),
      [[bob.accountId, bob.email]],
    );
    assert.ok((found.accounts[0]?.balance ?? 0n) >= 7_000n);
    const made = await accounts.createAccount(
      { name: 'Cyrus', email: 'cyrus-caller@example.com', password: 'cyrus password 1' },
      asOperator,
    );
    assert.equal(made.account?.email, 'cyrus-caller@example.com');
    const id = made.account?.id ?? '';
    const audit = await accounts.listAuditEntries({ accountId: id, limit: 0 }, asOperator);
    assert.deepEqual(
      audit.entries.map((e) => [e.action, e.detail]),
      [['account_created', 'account “Cyrus” created with sign-in cyrus-caller@example.com']],
    );
    const signIn = await svc.connection.clients.console.signIn({
      email: 'cyrus-caller@example.com',
      password: 'cyrus password 1',
      clientAddress: '',
    });
    assert.equal(signIn.session?.accountId, id);
    assert.equal((await accounts.getAccount({ accountId: '' }, asAlice)).account?.email, alice.email);
    // Each call's refusal is handled as it is made (no rejection waits unobserved).
    for (const got of await Promise.all(
      [
        accounts.listAccounts({ query: '', pageToken: '' }, asAlice),
        accounts.listAuditEntries({ accountId: alice.accountId, limit: 0 }, asAlice),
        accounts.createAccount({ name: 'x', email: 'x-caller@example.com', password: 'x password 12' }, asAlice),
      ].map((call) => status(call as Promise<unknown>)),
    ))
      assert.equal(got.code, Status.PERMISSION_DENIED);
    assert.equal(
      (await status(accounts.listAuditEntries({ accountId: 'acc_nope', limit: 0 }, asOperator))).code,
      Status.NOT_FOUND,
    );
  });

  it('WalletService.ListLedger pages newest first with before/next_before, and refuses a made-up cursor', async () => {
    const { wallet } = svc.connection.clients;
    for (const n of [1, 2, 3])
      await wallet.topUp(
        { accountId: alice.accountId, amount: 10n, reference: `page ${n}`, requestId: `page-${n}` },
        asOperator,
      );
    const all = await wallet.listLedger({ accountId: '', limit: 1000, before: '' }, asAlice);
    assert.ok(all.entries.length >= 4);
    const paged: string[] = [];
    let before = '';
    for (let pages = 0; pages < 10; pages++) {
      const page = await wallet.listLedger({ accountId: '', limit: 2, before }, asAlice);
      assert.ok(page.entries.length <= 2);
      paged.push(...page.entries.map((e) => e.id));
      if (page.nextBefore === '') break;
      assert.equal(page.nextBefore, page.entries.at(-1)?.id);
      before = page.nextBefore;
    }
    assert.deepEqual(
      paged,
      all.entries.map((e) => e.id),
    );
    const bad = await status(wallet.listLedger({ accountId: '', limit: 2, before: "le_1' or 1=1" }, asAlice));
    assert.equal(bad.code, Status.INVALID_ARGUMENT);
  });

  it('ModelService.ListModels and ToolService.ListTools answer a session with every model and tool and its price', async () => {
    const { models, tools } = svc.connection.clients;
    const listed = await models.listModels({}, asAlice);
    const own = listed.models.filter((m) => m.aliasOf === '').map((m) => m.id);
    assert.deepEqual(own, [...svc.core.deps.config.models.keys()]);
    for (const m of listed.models) if (m.aliasOf !== '') assert.ok(own.includes(m.aliasOf), m.id);
    const priced = await tools.listTools({}, asAlice);
    assert.deepEqual(
      priced.tools.map((t) => t.name),
      [...svc.core.deps.config.tools.keys()],
    );
    for (const t of priced.tools) {
      const price = svc.core.deps.config.tools.get(t.name)?.price;
      if (price?.kind === 'flat') assert.equal(t.price?.flat, price.credits);
      else assert.equal(t.price?.cap, price?.cap);
    }
    const ended = as(`Session ${'y'.repeat(43)}`);
    assert.equal((await status(models.listModels({}, ended))).code, Status.UNAUTHENTICATED);
    assert.equal((await status(tools.listTools({}, ended))).code, Status.UNAUTHENTICATED);
  });

  it('a session is no API key, and an ended or made-up session is nobody', async () => {
    const { chat, keys, wallet } = svc.connection.clients;
    const chatCall = chat.createChatCompletion({ params: { model: 'svc-pro', messages: [] } }, asAlice);
    assert.equal((await status(chatCall)).code, Status.UNAUTHENTICATED);
    const madeUp = as(`Session ${'x'.repeat(43)}`);
    assert.equal((await status(keys.listKeys({ accountId: alice.accountId }, madeUp))).code, Status.UNAUTHENTICATED);
    assert.equal(
      (await status(wallet.topUp({ accountId: alice.accountId, amount: 1n, reference: '', requestId: '' }, madeUp)))
        .code,
      Status.UNAUTHENTICATED,
    );
    // An API key is no session, nor an operator.
    const asKey = as(`Bearer ${alice.key}`);
    assert.equal((await status(svc.connection.clients.console.getSession({}, asKey))).code, Status.UNAUTHENTICATED);
  });
});
