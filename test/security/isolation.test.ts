import assert from 'node:assert/strict';
import { Metadata, Status } from 'nice-grpc';
import { ChatCompletionParams, ChatRole } from '../../gen/svc/core/v1/chat';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';

const hi = (): ChatCompletionParams =>
  ChatCompletionParams.fromPartial({ model: 'svc-pro', messages: [{ role: ChatRole.CHAT_ROLE_USER, content: 'hi' }] });

type Clients = TestSvc['connection']['clients'];

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

async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

const REFUSED = [Status.PERMISSION_DENIED, Status.NOT_FOUND, Status.UNAUTHENTICATED];

/**
 * Account A, holding a valid key, tries every RPC of proto/svc/core/v1 on account B's ids. Each
 * call is either refused or answers about A alone; B's books, keys, holds, usage and stored
 * responses are the same afterwards.
 */
describe('security: one account can never read or act on another', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let a: FundedKey;
  let b: FundedKey;
  let c: Clients;
  let asA: { metadata: Metadata };
  let asAdmin: { metadata: Metadata };
  let bResponseId: string;
  let bSnapshot: string;

  async function snapshotOfB(): Promise<string> {
    const wallet = await svc.wallet(b.accountId);
    const ledger = await svc.ledger(b.accountId, 1000);
    const holds = await svc.store.db
      .selectFrom('holds')
      .select(['request_id', 'amount', 'status'])
      .where('account_id', '=', b.accountId)
      .orderBy('request_id')
      .execute();
    const keys = await svc.store.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', b.accountId)
      .orderBy('id')
      .execute();
    const usage = await svc.store.db
      .selectFrom('usage_records')
      .select(['request_id', 'cost'])
      .where('account_id', '=', b.accountId)
      .orderBy('request_id')
      .execute();
    const stored = await svc.store.db
      .selectFrom('stored_responses')
      .select(['id'])
      .where('account_id', '=', b.accountId)
      .orderBy('id')
      .execute();
    return JSON.stringify({ wallet, ledger, holds, keys, usage, stored }, (_k, v: unknown) =>
      typeof v === 'bigint' ? v.toString() : v,
    );
  }

  before(async () => {
    svc = await startSvc();
    a = await svc.createFundedKey(1_000_000n, 'alice');
    b = await svc.createFundedKey(1_000_000n, 'bob');
    c = svc.connection.clients;
    asA = { metadata: new Metadata({ authorization: `Bearer ${a.key}` }) };
    asAdmin = { metadata: new Metadata({ authorization: `Bearer ${svc.adminToken}` }) };
    const asB = { metadata: new Metadata({ authorization: `Bearer ${b.key}` }) };
    // B's history: a stored response, a chat, a tool call, and an open hold.
    const created = await c.chat.createResponse(
      { body: { model: 'svc-pro', input: 'remember this', store: true } },
      asB,
    );
    bResponseId = String(created.response?.['id']);
    await c.chat.createChatCompletion({ params: hi() }, asB);
    await c.tools.callTool({ name: 'shopping_search', arguments: { query: 'laptop' } }, asB);
    await c.wallet.hold({ accountId: b.accountId, requestId: 'b-open-hold', amount: 500n, ttlSeconds: 600 }, asAdmin);
    bSnapshot = await snapshotOfB();
    assert.match(bResponseId, /^resp_/);
  });
  after(async () => {
    await svc?.close();
  });

  afterEach(async () => {
    assert.equal(await snapshotOfB(), bSnapshot, "B's account is untouched");
  });

  it('AccountService: CreateAccount is admin-only; GetAccount(B) answers A or nothing', async () => {
    assert.ok(REFUSED.includes((await status(c.accounts.createAccount({ name: 'x' }, asA))).code));
    const got = await status(c.accounts.getAccount({ accountId: b.accountId }, asA));
    if (got.code === Status.OK) assert.equal(got.value?.account?.id, a.accountId);
    else assert.ok(REFUSED.includes(got.code));
  });

  it('AuthService: Authenticate names A only', async () => {
    const got = await c.auth.authenticate({}, asA);
    assert.equal(got.principal?.accountId, a.accountId);
    assert.equal(got.principal?.keyId, a.keyId);
  });

  it("ChatService: B's response can be neither listed, cancelled, deleted nor counted from by A", async () => {
    const id = { responseId: bResponseId };
    assert.equal(
      (await status(c.chat.listResponseInputItems({ ...id, limit: 0, order: '', after: '' }, asA))).code,
      Status.NOT_FOUND,
    );
    assert.equal((await status(c.chat.cancelResponse(id, asA))).code, Status.NOT_FOUND);
    assert.equal((await status(c.chat.deleteResponse(id, asA))).code, Status.NOT_FOUND);
    const count = c.chat.countResponseInputTokens(
      { body: { model: 'svc-pro', input: 'x', previous_response_id: bResponseId } },
      asA,
    );
    assert.equal((await status(count)).code, Status.NOT_FOUND);
  });

  it("ChatService: GetResponse, previous_response_id and item_reference of B's response are not found, on every variant", async () => {
    assert.equal((await status(c.chat.getResponse({ responseId: bResponseId }, asA))).code, Status.NOT_FOUND);
    const bodies = [
      { model: 'svc-pro', input: 'and now?', previous_response_id: bResponseId },
      {
        model: 'svc-pro',
        input: [
          { type: 'item_reference', id: `msg_${bResponseId.slice('resp_'.length)}_0` },
          { role: 'user', content: 'x' },
        ],
      },
    ];
    for (const body of bodies) {
      const unary = await status(c.chat.createResponse({ body }, asA));
      assert.ok([Status.NOT_FOUND, Status.INVALID_ARGUMENT].includes(unary.code), `unary: ${unary.code}`);
      const streamed = await status(drain(c.chat.streamResponse({ body: { ...body, stream: true } }, asA)));
      if (streamed.code === Status.OK) {
        // A stream may carry the failure as its own event instead.
        const types = (streamed.value ?? []).map((m) => String(m.event?.['type']));
        assert.ok(!types.includes('response.completed'), `a stream over B's response completed: ${types.join(',')}`);
      } else assert.ok([Status.NOT_FOUND, Status.INVALID_ARGUMENT].includes(streamed.code));
    }
    // Plain chat is charged to A alone (the afterEach checks B).
    const before = await svc.wallet(a.accountId);
    await c.chat.createChatCompletion({ params: hi() }, asA);
    await drain(c.chat.streamChatCompletion({ params: hi() }, asA));
    assert.ok((await svc.wallet(a.accountId)).balance < before.balance);
  });

  it('ConsoleService: an API key is no console session, for every RPC', async () => {
    const calls: [string, Promise<unknown>][] = [
      ['SignOut', c.console.signOut({}, asA)],
      ['GetSession', c.console.getSession({}, asA)],
      ['ChangePassword', c.console.changePassword({ currentPassword: 'a', newPassword: 'bbbbbbbbbbbb' }, asA)],
      ['CreateConsoleKey', c.console.createConsoleKey({ name: 'n', scope: '' }, asA)],
      // The operator's account calls, now AccountService's: a key is no operator either.
      ['AccountService.ListAccounts', c.accounts.listAccounts({}, asA)],
      ['AccountService.ListAuditEntries', c.accounts.listAuditEntries({ accountId: b.accountId }, asA)],
      [
        'AccountService.CreateAccount with a sign-in',
        c.accounts.createAccount({ name: 'n', email: 'e@example.com', password: 'pppppppppppp' }, asA),
      ],
      [
        "AccountService.SetSignIn on B's account",
        c.accounts.setSignIn(
          { accountId: b.accountId, email: 'taken-over@example.com', password: 'pppppppppppp' },
          asA,
        ),
      ],
      ['SignInOperator', c.console.signInOperator({ adminToken: a.key, clientAddress: '127.0.0.1' }, asA)],
    ];
    for (const [name, call] of calls) {
      const got = await status(call);
      assert.ok(REFUSED.includes(got.code) || got.code === Status.INVALID_ARGUMENT, `${name}: ${got.code}`);
    }
  });

  it("KeyService: A cannot create, list, revoke, roll or cap B's keys, and B's key still works", async () => {
    assert.ok(
      REFUSED.includes(
        (await status(c.keys.createKey({ accountId: b.accountId, name: 'mine now', scope: '' }, asA))).code,
      ),
    );
    const listed = await status(c.keys.listKeys({ accountId: b.accountId }, asA));
    if (listed.code === Status.OK) {
      const ids = (listed.value?.keys ?? []).map((k) => k.id);
      assert.ok(!ids.includes(b.keyId), 'no key of B listed');
      assert.ok(ids.includes(a.keyId));
    } else assert.ok(REFUSED.includes(listed.code));
    assert.ok(REFUSED.includes((await status(c.keys.revokeKey({ keyId: b.keyId }, asA))).code));
    if ('rollKey' in c.keys) {
      assert.ok(REFUSED.includes((await status(c.keys.rollKey({ keyId: b.keyId }, asA))).code));
    }
    const capped = await status(
      c.keys.updateKeyCaps({ keyId: b.keyId, capDaily: 0n, removeCapDaily: false, removeCapMonthly: false }, asA),
    );
    assert.ok(REFUSED.includes(capped.code), `UpdateKeyCaps: ${capped.code}`);
    const bKeys = await c.keys.listKeys(
      { accountId: b.accountId },
      { metadata: new Metadata({ authorization: `Bearer ${b.key}` }) },
    );
    assert.equal(bKeys.keys.find((k) => k.id === b.keyId)?.capDaily, undefined, "B's key is not capped");
    const stillB = await c.auth.authenticate({}, { metadata: new Metadata({ authorization: `Bearer ${b.key}` }) });
    assert.equal(stillB.principal?.accountId, b.accountId);
  });

  it('ModelService and ToolService: calls carry no account ids and charge A alone', async () => {
    await c.models.listModels({}, asA);
    await c.models.getModel({ modelId: 'svc-pro' }, asA);
    await c.tools.listTools({}, asA);
    const before = await svc.wallet(a.accountId);
    await c.tools.callTool({ name: 'maps_search_places', arguments: { query: 'cafe' } }, asA);
    assert.ok((await svc.wallet(a.accountId)).balance < before.balance);
  });

  it("UsageService: B's account or key in the filter is refused or empty", async () => {
    for (const filter of [{ accountId: b.accountId }, { keyId: b.keyId }, { accountId: b.accountId, keyId: b.keyId }]) {
      const list = await status(c.usage.listUsage({ filter: filter as never, pageSize: 100, pageToken: '' }, asA));
      if (list.code === Status.OK) {
        const records = (list.value as { records?: { accountId?: string; requestId?: string }[] }).records ?? [];
        assert.ok(
          records.every((r) => r.accountId === undefined || r.accountId === a.accountId),
          JSON.stringify(records),
        );
        assert.equal(records.filter((r) => JSON.stringify(r).includes(b.keyId)).length, 0);
      } else assert.ok(REFUSED.includes(list.code) || list.code === Status.INVALID_ARGUMENT, `${list.code}`);
      const summary = await status(c.usage.getUsageSummary({ filter: filter as never }, asA));
      if (summary.code === Status.OK)
        assert.ok(
          !JSON.stringify(summary.value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)).includes(
            b.accountId,
          ),
        );
      else assert.ok(REFUSED.includes(summary.code) || summary.code === Status.INVALID_ARGUMENT);
    }
  });

  it("WalletService: GetWallet/ListLedger(B) answer A; TopUp is admin-only; Hold/Settle/Release with B's ids touch A at most", async () => {
    const wallet = await status(c.wallet.getWallet({ accountId: b.accountId }, asA));
    if (wallet.code === Status.OK) assert.equal(wallet.value?.wallet?.accountId, a.accountId);
    else assert.ok(REFUSED.includes(wallet.code));
    const ledger = await status(c.wallet.listLedger({ accountId: b.accountId, limit: 100 }, asA));
    if (ledger.code === Status.OK) assert.ok((ledger.value?.entries ?? []).every((e) => e.accountId === a.accountId));
    else assert.ok(REFUSED.includes(ledger.code));
    assert.ok(
      REFUSED.includes(
        (await status(c.wallet.topUp({ accountId: b.accountId, amount: 1000n, reference: 'x', requestId: '' }, asA)))
          .code,
      ),
    );
    for (const call of [
      c.wallet.hold({ accountId: b.accountId, requestId: 'a-hold', amount: 10n, ttlSeconds: 60 }, asA),
      c.wallet.release({ accountId: b.accountId, requestId: 'b-open-hold' }, asA),
      c.wallet.settle({ accountId: b.accountId, requestId: 'b-open-hold', amount: 7n }, asA),
    ]) {
      const got = await status(call as Promise<{ wallet?: { accountId: string } }>);
      if (got.code === Status.OK) assert.equal(got.value?.wallet?.accountId, a.accountId);
      else assert.ok(REFUSED.includes(got.code));
    }
  });

  it("HTTP: GET /v1/openai/responses/{B's id} with A's key is a 404, with B's key a 200", async () => {
    const asKey = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });
    const other = await fetch(`${svc.baseUrl}/v1/openai/responses/${bResponseId}`, asKey(a.key));
    assert.equal(other.status, 404);
    const body = (await other.json()) as { error: { type: string } };
    assert.equal(body.error.type, 'invalid_request_error');
    const own = await fetch(`${svc.baseUrl}/v1/openai/responses/${bResponseId}`, asKey(b.key));
    assert.equal(own.status, 200);
  });
});

describe('security: admin RPCs refuse API keys and wrong tokens', function () {
  let svc: TestSvc;
  let a: FundedKey;

  before(async () => {
    svc = await startSvc();
    a = await svc.createFundedKey(1000n, 'alice');
  });
  after(async () => {
    await svc?.close();
  });

  it('CreateAccount, CreateKey, TopUp: key → PERMISSION_DENIED; none, wrong, one-character-off and prefixed tokens → UNAUTHENTICATED', async () => {
    const c = svc.connection.clients;
    const t = svc.adminToken;
    const flipped = t.slice(0, -1) + (t.endsWith('a') ? 'b' : 'a');
    const as = (authorization: string | undefined) => ({
      metadata: new Metadata(authorization === undefined ? {} : { authorization }),
    });
    const cases: [string, string | undefined, Status[]][] = [
      ['api key', `Bearer ${a.key}`, [Status.PERMISSION_DENIED]],
      ['no token', undefined, [Status.UNAUTHENTICATED]],
      ['wrong token', 'Bearer wrong', [Status.UNAUTHENTICATED]],
      ['one character off', `Bearer ${flipped}`, [Status.UNAUTHENTICATED]],
      ['token with a suffix', `Bearer ${t}x`, [Status.UNAUTHENTICATED]],
      ['token prefix', `Bearer ${t.slice(0, -1)}`, [Status.UNAUTHENTICATED]],
      ['no Bearer', t, [Status.UNAUTHENTICATED]],
    ];
    const before = await svc.wallet(a.accountId);
    for (const [name, auth, expected] of cases) {
      for (const [rpc, call] of [
        ['CreateAccount', () => c.accounts.createAccount({ name: 'x' }, as(auth))],
        ['CreateKey', () => c.keys.createKey({ accountId: a.accountId, name: 'x', scope: '' }, as(auth))],
        ['TopUp', () => c.wallet.topUp({ accountId: a.accountId, amount: 5n, reference: '', requestId: '' }, as(auth))],
      ] as const) {
        const got = await status((call as () => Promise<unknown>)());
        assert.ok(expected.includes(got.code), `${rpc} with ${name}: ${got.code}`);
      }
    }
    assert.deepEqual(await svc.wallet(a.accountId), before);
    const ok = await c.accounts.createAccount({ name: 'by the operator' }, as(`Bearer ${t}`));
    assert.match(ok.account?.id ?? '', /^acc_/);
  });
});
