import assert from 'node:assert/strict';
import { ClientError, Metadata, Status } from 'nice-grpc';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { expectedCost, testConfig } from '../openai/fixture';

// The upstream's usage of the slow stream: 900 output tokens, well under the 1,000 the hold covers.
const USAGE = { prompt_tokens: 100, completion_tokens: 900 };
const FULL_COST = expectedCost(USAGE.prompt_tokens, USAGE.completion_tokens);
// Room for one call's hold (about 600 credits: 1,000 output tokens) but not two.
const FUNDS = 1000n;
const TTL_SECONDS = 1;

async function poll<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 3000; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${what} never happened`);
}

async function grpcError(
  call: (options: { metadata: Metadata; onTrailer: (t: Metadata) => void }) => Promise<unknown>,
  metadata: Metadata,
) {
  let trailer: Metadata | undefined;
  try {
    await call({ metadata, onTrailer: (t) => (trailer = t) });
  } catch (error) {
    assert.ok(error instanceof ClientError, String(error));
    return { status: error.code, code: trailer?.get('svc-error-code') };
  }
  return assert.fail('the call succeeded');
}

/**
 * Issue 20 points 1 and 4: the holds the core places for its own calls. Hold/Settle/Release over
 * gRPC are for internal services (the admin token) and never reach a core-placed hold; a running
 * call keeps its hold alive past the hold TTL while the reaper runs.
 */
describe('security: the holds of running calls', function () {
  this.timeout(60_000);
  let upstream: FakeUpstream;
  let svc: TestSvc;
  const asAdmin = (): Metadata => new Metadata({ authorization: `Bearer ${svc.adminToken}` });
  const asKey = (key: string): Metadata => new Metadata({ authorization: `Bearer ${key}` });

  before(async () => {
    upstream = await startFakeUpstream();
    svc = await startSvc({
      config: testConfig(upstream.baseUrl, `limits:\n  hold_ttl_seconds: ${TTL_SECONDS}\n`),
    });
    svc.core.startReaper(50);
  });
  after(async () => {
    await svc?.close();
    await upstream?.close();
  });

  const client = (key: string): OpenAI =>
    new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });

  async function openHold(accountId: string) {
    return poll(
      () =>
        svc.store.db
          .selectFrom('holds')
          .selectAll()
          .where('account_id', '=', accountId)
          .where('status', '=', 'held')
          .executeTakeFirst(),
      (row) => row !== undefined,
      'the hold of the stream',
    ).then((row) => row!);
  }

  /** Starts a stream that sends its first words, then waits until `resume` is called; `rest` is the text. */
  async function slowStream(funded: FundedKey) {
    let resume = (): void => undefined;
    upstream.enqueue({
      kind: 'slow',
      afterPieces: 2,
      resume: new Promise<void>((r) => (resume = r)),
      text: 'one two three four',
      usage: USAGE,
    });
    const stream = await client(funded.key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'count slowly' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const iterator = stream[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).done, false, 'the first chunk arrived');
    const rest = (async () => {
      let text = '';
      for (;;) {
        const next = await iterator.next();
        if (next.done === true) return text;
        text += next.value.choices[0]?.delta.content ?? '';
      }
    })();
    return { resume, rest, hold: await openHold(funded.accountId) };
  }

  it('point 1: a key cannot Hold, Settle or Release; the admin token cannot reach a hold the core placed', async () => {
    const funded = await svc.createFundedKey(FUNDS, 'settles itself');
    const wallet = svc.connection.clients.wallet;
    const running = await slowStream(funded);
    const requestId = running.hold.request_id;
    const account = funded.accountId;

    for (const [name, call] of [
      ['Settle', (o: object) => wallet.settle({ accountId: account, requestId, amount: 1n }, o)],
      ['Release', (o: object) => wallet.release({ accountId: account, requestId }, o)],
      ['Hold', (o: object) => wallet.hold({ accountId: account, requestId: 'mine', amount: 1n, ttlSeconds: 0 }, o)],
    ] as const) {
      const refused = await grpcError(call, asKey(funded.key));
      assert.deepEqual(refused, { status: Status.PERMISSION_DENIED, code: 'admin_required' }, name);
    }
    // An internal service bills under its own request ids: the same id is another hold.
    const settled = await wallet.settle({ accountId: account, requestId, amount: 1n }, { metadata: asAdmin() });
    assert.equal(settled.charged, 1n);
    assert.equal(settled.entry?.requestId, requestId);
    await wallet.release({ accountId: account, requestId }, { metadata: asAdmin() });
    const core = await svc.store.db
      .selectFrom('holds')
      .selectAll()
      .where('id', '=', running.hold.id)
      .executeTakeFirst();
    assert.equal(core?.status, 'held', "the core's hold is untouched");
    assert.equal((await svc.wallet(account)).held, running.hold.amount);

    running.resume();
    assert.equal(await running.rest, 'one two three four');
    const after = await poll(
      () => svc.wallet(account),
      (w) => w.held === 0n,
      'the settle',
    );
    assert.equal(after.balance, FUNDS - FULL_COST - 1n, 'the stream paid its full usage, the service its 1');
  });

  it('point 1: a hold and settle placed beforehand under a request id do not make a later call with that id free', async () => {
    const funded = await svc.createFundedKey(FUNDS, 'pre-settles');
    const wallet = svc.connection.clients.wallet;
    const requestId = `pre-settled-${Date.now()}`;
    await wallet.hold({ accountId: funded.accountId, requestId, amount: 1n, ttlSeconds: 0 }, { metadata: asAdmin() });
    await wallet.settle({ accountId: funded.accountId, requestId, amount: 1n }, { metadata: asAdmin() });
    upstream.enqueue({ kind: 'text', usage: USAGE });
    const answer = await client(funded.key).chat.completions.create(
      { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-request-id': requestId } },
    );
    assert.equal(answer.usage?.completion_tokens, USAGE.completion_tokens);
    const after = await poll(
      () => svc.wallet(funded.accountId),
      (w) => w.held === 0n,
      'the settle',
    );
    assert.equal(after.balance, FUNDS - 1n - FULL_COST);
  });

  it('point 4: a stream outliving the hold TTL keeps its hold while the reaper runs, blocks what it reserved, and pays its full usage', async () => {
    const funded = await svc.createFundedKey(FUNDS, 'slow stream');
    const running = await slowStream(funded);
    assert.ok(2n * running.hold.amount > FUNDS, `one hold (${running.hold.amount}) leaves no room for a second`);
    const firstExpiry = Number(running.hold.expires_at);
    // Several TTLs and dozens of reaper rounds after the hold would first have expired.
    const watched = await poll(
      async () => {
        const row = await svc.store.db
          .selectFrom('holds')
          .selectAll()
          .where('id', '=', running.hold.id)
          .executeTakeFirstOrThrow();
        return { row, now: Date.now() };
      },
      ({ row, now }) => row.status !== 'held' || now > firstExpiry + 3 * TTL_SECONDS * 1000,
      'the wait past the first expiry',
    );
    assert.equal(watched.row.status, 'held', 'the reaper left the running call its hold');
    assert.ok(Number(watched.row.expires_at) > firstExpiry, 'the call extended its hold');

    // A call asking for as much as the stream holds (an explicit limit: svc never lowers it) is
    // refused; one with no limit would be fitted to the free credit that is left.
    await assert.rejects(
      client(funded.key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'me too' }],
        max_tokens: 1000,
      }),
      (error: unknown) =>
        error instanceof OpenAI.APIError && error.status === 429 && error.code === 'insufficient_quota',
      'no call is admitted against the credit the stream holds',
    );

    running.resume();
    assert.equal(await running.rest, 'one two three four');
    const after = await poll(
      () => svc.wallet(funded.accountId),
      (w) => w.held === 0n,
      'the settle',
    );
    assert.equal(after.balance, FUNDS - FULL_COST, 'charged its full usage');
    const charges = (await svc.ledger(funded.accountId)).filter((e) => e.kind === 'charge');
    assert.deepEqual(
      charges.map((e) => e.amount),
      [-FULL_COST],
    );
  });
});
