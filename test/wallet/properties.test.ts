import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sql } from 'kysely';
import { createAccountService } from '../../core/accounts/service';
import { isSvcError } from '../../core/errors';
import { createKeyService } from '../../core/keys/service';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createBatchedWalletService } from '../../core/wallet/batched';
import { createWalletService, type WalletServiceOptions } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { fuzzRuns } from '../fuzz/fuzz-kit';

type HoldStatus = 'held' | 'settled' | 'released' | 'expired';

interface ModelHold {
  amount: bigint;
  status: HoldStatus;
  expiresAt: number;
  settledAmount: bigint | null;
}

/** What the wallet must hold, kept the simplest way: plain numbers and maps. */
interface Model {
  balance: bigint;
  readonly holds: Map<string, ModelHold>;
  /** The one charge per request id. */
  readonly charges: Map<string, bigint>;
  readonly topUps: Map<string, bigint>;
  /** The key lineage's caps (every hold of a run is placed for it) and what it spent through holds. */
  readonly capDaily: bigint | null;
  readonly capMonthly: bigint | null;
  readonly capTotal: bigint | null;
  capSpent: bigint;
}

interface Real {
  readonly wallet: WalletService;
  readonly store: Store;
  readonly accountId: string;
  readonly clock: { now: number };
  readonly lineageId: string;
  /** The lineage's caps by period kind, to check that no counter ever passes its cap. */
  readonly caps: { readonly d: bigint | null; readonly m: bigint | null; readonly t: bigint | null };
}

const held = (m: Model): bigint =>
  [...m.holds.values()].filter((h) => h.status === 'held').reduce((s, h) => s + h.amount, 0n);

/** The code of a domain error, or 'ok'; anything else is a failure of the test. */
async function outcome<T>(promise: Promise<T>): Promise<{ code: string; value?: T }> {
  try {
    return { code: 'ok', value: await promise };
  } catch (error) {
    if (isSvcError(error)) return { code: error.code };
    throw error;
  }
}

let stepsChecked = 0;

/** The invariants of ISSUE 8, read from the database: they hold after any step, in any order. */
async function checkInvariants(r: Real) {
  const db = r.store.db;
  const wallet = await db
    .selectFrom('wallets')
    .select(['balance', 'held'])
    .where('account_id', '=', r.accountId)
    .executeTakeFirstOrThrow();
  const ledger = await db
    .selectFrom('ledger_entries')
    .select(['amount', 'kind', 'request_id'])
    .where('account_id', '=', r.accountId)
    .execute();
  const holds = await db
    .selectFrom('holds')
    .select(['request_id', 'amount', 'status', 'settled_amount'])
    .where('account_id', '=', r.accountId)
    .execute();
  const balance = BigInt(wallet.balance);
  const heldNow = BigInt(wallet.held);
  assert.equal(
    balance,
    ledger.reduce((s, e) => s + BigInt(e.amount), 0n),
    'balance == sum(ledger)',
  );
  assert.equal(
    heldNow,
    holds.filter((h) => h.status === 'held').reduce((s, h) => s + BigInt(h.amount), 0n),
    'held == sum(open holds)',
  );
  assert.ok(balance - heldNow >= 0n, `balance - held >= 0 (${balance} - ${heldNow})`);
  // Exactly once: at most one charge per request id; a settled hold's charge is its settled amount.
  const chargesById = new Map<string, bigint[]>();
  for (const e of ledger.filter((x) => x.kind === 'charge'))
    chargesById.set(e.request_id, [...(chargesById.get(e.request_id) ?? []), -BigInt(e.amount)]);
  for (const [id, list] of chargesById) assert.equal(list.length, 1, `one charge for ${id}`);
  for (const h of holds.filter((x) => x.status === 'settled')) {
    const settled = BigInt(h.settled_amount ?? 0n);
    if (settled > 0n)
      assert.deepEqual(chargesById.get(h.request_id), [settled], `settled hold ${h.request_id} has its one charge`);
  }
  // The key's counters hold exactly the open holds placed for it, in every period.
  const capped = await db
    .selectFrom('holds')
    .select(['amount', 'status'])
    .where('account_id', '=', r.accountId)
    .where('lineage_id', '=', r.lineageId)
    .execute();
  const spend = await db
    .selectFrom('key_spend')
    .select(['period', 'spent', 'held'])
    .where('lineage_id', '=', r.lineageId)
    .execute();
  const cappedHeld = capped.filter((h) => h.status === 'held').reduce((sum, h) => sum + BigInt(h.amount), 0n);
  for (const row of spend) assert.equal(BigInt(row.held), cappedHeld, `key_spend ${row.period} held == open holds`);
  // SPEC §6: the hold is the most a call can cost, so no cap is ever passed, whatever usage was settled.
  for (const row of spend) {
    const cap = r.caps[row.period.slice(0, 1) as 'd' | 'm' | 't'];
    if (cap !== null)
      assert.ok(
        BigInt(row.spent) + BigInt(row.held) <= cap,
        `key_spend ${row.period}: spent ${row.spent} + held ${row.held} within the cap ${cap}`,
      );
  }
  // And no charge is above its hold.
  for (const h of holds.filter((x) => x.status === 'settled'))
    assert.ok(BigInt(h.settled_amount ?? 0n) <= BigInt(h.amount), `settled ${h.request_id} within its hold`);
  return { balance, heldNow, holds, chargesById, spend };
}

/** The lowest of the caps: with every hold in one day and month, the one that binds. */
function capOf(m: Model): bigint | null {
  let least: bigint | null = null;
  for (const cap of [m.capDaily, m.capMonthly, m.capTotal]) if (cap !== null && (least === null || cap < least)) least = cap;
  return least;
}

async function checkBooks(m: Model, r: Real): Promise<void> {
  stepsChecked += 1;
  const { balance, heldNow, holds, chargesById, spend } = await checkInvariants(r);
  for (const row of spend) assert.equal(BigInt(row.spent), m.capSpent, `key_spend ${row.period} spent as modelled`);
  if (spend.length === 0) assert.equal(m.capSpent, 0n, 'no key spend counted before the first hold');
  // And the database says what the model says.
  assert.equal(balance, m.balance, 'balance as modelled');
  assert.equal(heldNow, held(m), 'held as modelled');
  const statuses = Object.fromEntries(holds.map((h) => [h.request_id, `${h.status}:${BigInt(h.amount)}`]));
  const expected = Object.fromEntries([...m.holds].map(([id, h]) => [id, `${h.status}:${h.amount}`]));
  assert.deepEqual(statuses, expected, 'holds as modelled');
  assert.deepEqual(
    Object.fromEntries([...chargesById].map(([id, [a]]) => [id, a])),
    Object.fromEntries([...m.charges].filter(([, a]) => a > 0n)),
    'charges as modelled',
  );
}

const requestId = fc.constantFrom('r0', 'r1', 'r2', 'r3', 'r4');
const amount = fc.oneof(
  { weight: 9, arbitrary: fc.bigInt({ min: 1n, max: 150n }) },
  { weight: 1, arbitrary: fc.constant(0n) },
);

class TopUp implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly amount: bigint,
  ) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const got = await outcome(
      r.wallet.topUp({ accountId: r.accountId, amount: this.amount, requestId: `top-${this.id}` }),
    );
    if (this.amount === 0n) assert.equal(got.code, 'invalid_argument');
    else {
      assert.equal(got.code, 'ok');
      // A retried top-up (same request id) stands as the first one.
      if (!m.topUps.has(this.id)) {
        m.topUps.set(this.id, this.amount);
        m.balance += this.amount;
      }
      assert.equal(got.value?.entry.amount, m.topUps.get(this.id));
    }
    await checkBooks(m, r);
  }
  toString = (): string => `topUp(${this.id}, ${this.amount})`;
}

class Hold implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly amount: bigint,
    readonly ttl: number,
  ) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const got = await outcome(
      r.wallet.hold({
        accountId: r.accountId,
        requestId: this.id,
        amount: this.amount,
        ttlSeconds: this.ttl,
        lineageId: r.lineageId,
      }),
    );
    const cap = capOf(m);
    const first = m.holds.get(this.id);
    if (this.amount === 0n) assert.equal(got.code, 'invalid_argument');
    else if (first !== undefined) {
      // A retry returns the first hold, whatever became of it, and reserves nothing more.
      assert.equal(got.code, 'ok');
      assert.equal(got.value?.hold.amount, first.amount);
    } else if (m.balance - held(m) < this.amount) {
      assert.equal(got.code, 'insufficient_credit');
    } else if (cap !== null && m.capSpent + held(m) + this.amount > cap) {
      assert.equal(got.code, 'key_cap_exceeded');
    } else {
      assert.equal(got.code, 'ok');
      m.holds.set(this.id, {
        amount: this.amount,
        status: 'held',
        expiresAt: r.clock.now + this.ttl * 1000,
        settledAmount: null,
      });
    }
    await checkBooks(m, r);
  }
  toString = (): string => `hold(${this.id}, ${this.amount}, ttl ${this.ttl}s)`;
}

class Settle implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly amount: bigint,
  ) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const got = await outcome(r.wallet.settle({ accountId: r.accountId, requestId: this.id, amount: this.amount }));
    assert.equal(got.code, 'ok');
    const h = m.holds.get(this.id);
    let charged: bigint;
    if (h?.status === 'settled') {
      charged = m.charges.get(this.id) ?? 0n;
    } else if (this.amount === 0n) {
      // Nothing to charge: the hold (if open) is released.
      if (h?.status === 'held') h.status = 'released';
      charged = 0n;
    } else {
      const reserved = h?.status === 'held' ? h.amount : 0n;
      // The hold is the most a call can cost: a usage above it is charged at the hold.
      let bound = h === undefined || this.amount <= h.amount ? this.amount : h.amount;
      // A hold no longer open gave its caps' room back: the charge fits what they have left.
      const cap = capOf(m);
      if (h !== undefined && reserved === 0n && cap !== null) {
        const left = cap - m.capSpent - held(m);
        if (left < bound) bound = left < 0n ? 0n : left;
      }
      // Without an open hold, only the free credit pays, never other holds.
      const room = m.balance - held(m) + reserved;
      const take = bound <= room ? bound : room < 0n ? 0n : room;
      if (take > 0n && m.charges.has(this.id)) {
        charged = m.charges.get(this.id) as bigint; // charged once already (a settle with no hold)
      } else {
        m.balance -= take;
        if (h !== undefined) {
          h.status = 'settled';
          h.settledAmount = take;
          // Every hold is the key's: with caps, what it charged joins the key's spend.
          if (capOf(m) !== null) m.capSpent += take;
        }
        if (take > 0n) m.charges.set(this.id, take);
        charged = take;
      }
    }
    assert.equal(got.value?.charged, charged, 'charged as modelled');
    await checkBooks(m, r);
  }
  toString = (): string => `settle(${this.id}, ${this.amount})`;
}

class Release implements fc.AsyncCommand<Model, Real> {
  constructor(readonly id: string) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const got = await outcome(r.wallet.release({ accountId: r.accountId, requestId: this.id }));
    assert.equal(got.code, 'ok');
    const h = m.holds.get(this.id);
    if (h?.status === 'held') h.status = 'released';
    await checkBooks(m, r);
  }
  toString = (): string => `release(${this.id})`;
}

class Expire implements fc.AsyncCommand<Model, Real> {
  constructor(readonly advanceMs: number) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    r.clock.now += this.advanceMs;
    await r.wallet.reapExpired();
    // Holds of other accounts (earlier runs) may be reaped too; only this account's are checked.
    for (const h of m.holds.values()) if (h.status === 'held' && h.expiresAt < r.clock.now) h.status = 'expired';
    await checkBooks(m, r);
  }
  toString = (): string => `advance ${this.advanceMs}ms + reapExpired`;
}

const commands = [
  fc
    .tuple(
      fc.constantFrom('t0', 't1', 't2', 't3'),
      amount.map((a) => a * 3n),
    )
    .map(([id, a]) => new TopUp(id, a)),
  fc.tuple(requestId, amount, fc.constantFrom(1, 5, 60)).map(([id, a, ttl]) => new Hold(id, a, ttl)),
  // Below, at and above typical holds, 0, and absurd usage (an upstream reporting 10^7 tokens and more).
  fc
    .tuple(
      requestId,
      fc.oneof(amount, fc.bigInt({ min: 150n, max: 600n }), fc.bigInt({ min: 1_000_000n, max: 1_000_000_000_000_000n })),
    )
    .map(([id, a]) => new Settle(id, a)),
  requestId.map((id) => new Release(id)),
  fc.constantFrom(0, 1_500, 10_000, 120_000).map((ms) => new Expire(ms)),
];

// The key's caps: none, either or both, from below a typical hold to above what a run can spend.
const cap = fc.option(fc.bigInt({ min: 0n, max: 800n }), { nil: null, freq: 3 });
const caps = fc.tuple(cap, cap, cap);

function properties(name: string, factory: (options: WalletServiceOptions) => WalletService): void {
  describe(name, function () {
    this.timeout(600_000);
    let database: TestDatabase;
    let store: Store;
    const clock = { now: Date.UTC(2026, 0, 1) };
    let wallet: WalletService;

    before(async () => {
      database = await createTestDatabase();
      store = openStore(database.url);
      await migrate(store);
      wallet = factory({ store, now: () => clock.now, holdTtlSeconds: 60 });
    });
    after(async () => {
      await store?.close();
      await database?.drop();
    });

    it('as a state machine against a model: top-up, hold (for a key with random caps), settle below/at/above, release, expire, retries of each', async () => {
      const stepsBefore = stepsChecked;
      await fc.assert(
        fc.asyncProperty(
          fc.commands(commands, { maxCommands: 40, size: 'large' }),
          caps,
          async (cmds, [daily, monthly, total]) => {
            const account = await createAccountService({ store, now: () => clock.now }).create('properties');
            const { key } = await createKeyService({ store, now: () => clock.now }).create({
              accountId: account.id,
              capDaily: daily,
              capMonthly: monthly,
              capTotal: total,
            });
            const model: Model = {
              balance: 0n,
              holds: new Map(),
              charges: new Map(),
              topUps: new Map(),
              capDaily: daily,
              capMonthly: monthly,
              capTotal: total,
              capSpent: 0n,
            };
            const real: Real = {
              wallet,
              store,
              accountId: account.id,
              clock,
              lineageId: key.lineageId,
              caps: { d: daily, m: monthly, t: total },
            };
            await fc.asyncModelRun(() => ({ model, real }), cmds);
          },
        ),
        { numRuns: fuzzRuns(50) },
      );
      // The books of every account the runs made, once more, as a whole.
      const bad = await sql<{
        n: number;
      }>`select count(*) as n from wallets w where w.balance <> (select coalesce(sum(amount), 0) from ledger_entries l where l.account_id = w.account_id)`.execute(
        store.db,
      );
      assert.equal(Number(bad.rows[0]?.n), 0);
      // The runs did run: many steps, each checked against the database.
      assert.ok(stepsChecked - stepsBefore >= fuzzRuns(50) * 3, `only ${stepsChecked - stepsBefore} steps`);
    });

    it('concurrent bursts (retries of one request id racing each other included): the invariants hold after each, and a burst of holds reserves no more than was free', async () => {
      type Op = { kind: 'topup' | 'hold' | 'settle' | 'release'; id: string; amount: bigint; absurd: boolean };
      const op = fc.record({
        kind: fc.constantFrom('topup', 'hold', 'hold', 'settle', 'settle', 'release') as fc.Arbitrary<Op['kind']>,
        id: requestId,
        amount: fc.bigInt({ min: 1n, max: 200n }),
        // A settle of an absurd usage report (the amount × 10^12).
        absurd: fc.boolean(),
      });
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(op, { minLength: 2, maxLength: 12 }), { minLength: 1, maxLength: 5 }),
          fc.bigInt({ min: 0n, max: 400n }),
          caps,
          async (bursts, start, [capDaily, capMonthly, capTotal]) => {
            const account = await createAccountService({ store, now: () => clock.now }).create('bursts');
            const { key } = await createKeyService({ store, now: () => clock.now }).create({
              accountId: account.id,
              capDaily,
              capMonthly,
              capTotal,
            });
            const r: Real = {
              wallet,
              store,
              accountId: account.id,
              clock,
              lineageId: key.lineageId,
              caps: { d: capDaily, m: capMonthly, t: capTotal },
            };
            if (start > 0n) await wallet.topUp({ accountId: account.id, amount: start });
            for (const burst of bursts) {
              const free = await wallet.get(account.id).then((w) => w.balance - w.held);
              const heldBefore = new Set(
                (
                  await store.db.selectFrom('holds').select('request_id').where('account_id', '=', account.id).execute()
                ).map((h) => h.request_id),
              );
              const results = await Promise.all(
                burst.map((o) => {
                  const base = { accountId: account.id, requestId: o.id };
                  switch (o.kind) {
                    case 'topup':
                      return outcome(wallet.topUp({ ...base, requestId: `top-${o.id}`, amount: o.amount }));
                    case 'hold':
                      return outcome(wallet.hold({ ...base, amount: o.amount, lineageId: key.lineageId }));
                    case 'settle':
                      return outcome(
                        wallet.settle({ ...base, amount: o.absurd ? o.amount * 1_000_000_000_000n : o.amount }),
                      );
                    case 'release':
                      return outcome(wallet.release(base));
                  }
                }),
              );
              for (const [i, res] of results.entries()) {
                const allowed = burst[i]?.kind === 'hold' ? ['ok', 'insufficient_credit', 'key_cap_exceeded'] : ['ok'];
                assert.ok(allowed.includes(res.code), `${burst[i]?.kind}: ${res.code}`);
              }
              await checkInvariants(r);
              // A burst of holds alone can never reserve more than was free when it began.
              if (burst.every((o) => o.kind === 'hold')) {
                const after = await store.db
                  .selectFrom('holds')
                  .select(['request_id', 'amount'])
                  .where('account_id', '=', account.id)
                  .execute();
                const fresh = after.filter((h) => !heldBefore.has(h.request_id));
                assert.ok(
                  fresh.reduce((sum, h) => sum + BigInt(h.amount), 0n) <= free,
                  'never more than the free credit',
                );
              }
            }
            await wallet.reapExpired(clock.now + 10 * 60_000 + 1);
            await checkInvariants(r);
          },
        ),
        { numRuns: fuzzRuns(30) },
      );
    });
  });
}

describe('wallet properties', function () {
  properties('createWalletService', createWalletService);
  properties('createBatchedWalletService', (o) => createBatchedWalletService(o));
  properties('createBatchedWalletService, batches of 3, one at a time', (o) =>
    createBatchedWalletService({ ...o, maxBatch: 3, maxInFlight: 1 }),
  );
});
