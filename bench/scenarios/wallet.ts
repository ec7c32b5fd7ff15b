// Wallet throughput: hold+settle pairs per second through the real WalletService, on one hot
// wallet and spread over many wallets, on SQLite and on MariaDB, next to the rate of the bare
// conditional UPDATE that the wallet's correctness rests on (same database, same concurrency,
// same run), so the cost of the bookkeeping around it is visible as a ratio.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { createConnection } from 'mysql2/promise';
import pino from 'pino';
import { createAccountService } from '../../core/accounts/service';
import type { Principal } from '../../core/auth/types';
import { createMeter } from '../../core/billing/meter';
import { maskUrl, migrate, openStore, type Store } from '../../core/store/db';
import { createUsageRecorder } from '../../core/usage/recorder';
import { createBatchedWalletService } from '../../core/wallet/batched';
import { createWalletService } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { runLoad, type LoadResult } from '../lib/measure';
import type { BenchOptions, BenchRow } from '../types';

const DEFAULT_MYSQL_URL = 'mysql://root@127.0.0.1:3306/svc_bench';
const CONCURRENCY = 16;
// The batched wallet's throughput grows with the callers it can coalesce: one more row at 4×.
const WIDE_CONCURRENCY = 64;
const MANY_WALLETS = 256;
const START_BALANCE = 1_000_000_000_000n;
const HOLD = 10n;
const COST = 7n;

interface Target {
  readonly name: 'sqlite' | 'mariadb';
  readonly url: string;
  cleanup(): Promise<void>;
}

async function sqliteTarget(): Promise<Target> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  return {
    name: 'sqlite',
    url: `sqlite:${path.join(dir, 'bench.db')}`,
    cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

async function mariadbTarget(url: string): Promise<Target> {
  const u = new URL(url);
  const database = decodeURIComponent(u.pathname.slice(1));
  if (!/^[A-Za-z0-9_]+$/.test(database))
    throw new Error(`SVC_BENCH_MYSQL_URL: database name ${JSON.stringify(database)} must be [A-Za-z0-9_]+`);
  const connection = await createConnection({
    host: u.hostname,
    port: u.port === '' ? 3306 : Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
  });
  try {
    await connection.query(`CREATE DATABASE IF NOT EXISTS \`${database}\` CHARACTER SET utf8mb4`);
  } finally {
    await connection.end();
  }
  // The database is kept (it may be the operator's); each run uses fresh accounts in it.
  return { name: 'mariadb', url, cleanup: async () => undefined };
}

async function createFundedAccounts(store: Store, count: number): Promise<string[]> {
  const accounts = createAccountService({ store, now: Date.now });
  const wallet = createWalletService({ store, now: Date.now });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { id } = await accounts.create(`bench ${i}`);
    await wallet.topUp({ accountId: id, amount: START_BALANCE, reference: 'bench' });
    ids.push(id);
  }
  return ids;
}

async function balanceOf(store: Store, accountId: string): Promise<bigint> {
  const row = await store.db
    .selectFrom('wallets')
    .select('balance')
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return row.balance;
}

function rowsFor(scenario: string, variant: string, unit: string, result: LoadResult): BenchRow[] {
  return [
    { scenario, variant, metric: 'throughput', value: result.opsPerSecond, unit },
    { scenario, variant, metric: 'latency p50', value: result.latencyMs.p50, unit: 'ms' },
    { scenario, variant, metric: 'latency p99', value: result.latencyMs.p99, unit: 'ms' },
  ];
}

async function benchTarget(target: Target, opts: BenchOptions): Promise<BenchRow[]> {
  const durationMs = opts.quick ? 2_000 : 10_000;
  const warmupMs = opts.quick ? 300 : 1_000;
  const store = openStore(target.url, { poolSize: CONCURRENCY });
  const rows: BenchRow[] = [];
  try {
    await migrate(store);
    const wallet = createWalletService({ store, now: Date.now });
    const batched = createBatchedWalletService({ store, now: Date.now });
    const runTag = `${Date.now().toString(36)}${process.pid.toString(36)}`;
    for (const shape of ['hot', 'many'] as const) {
      const accounts = await createFundedAccounts(store, shape === 'hot' ? 1 : MANY_WALLETS);
      const pick = (worker: number, seq: number): string => accounts[(worker * 7919 + seq) % accounts.length] as string;
      const scenario = `wallet ${target.name} ${shape === 'hot' ? '1 hot wallet' : `${MANY_WALLETS} wallets`} c=${CONCURRENCY}`;
      const before = await Promise.all(accounts.map((id) => balanceOf(store, id)));

      let updates = 0;
      const raw = await runLoad({
        concurrency: CONCURRENCY,
        durationMs,
        warmupMs,
        op: async (worker, seq) => {
          const result =
            await sql`UPDATE wallets SET balance = balance - 1 WHERE account_id = ${pick(worker, seq)} AND balance >= 1`.execute(
              store.db,
            );
          if (result.numAffectedRows !== 1n)
            throw new Error('the conditional UPDATE changed no row: the bench wallet ran dry');
          updates++;
        },
      });
      rows.push(...rowsFor(scenario, 'raw conditional UPDATE', 'updates/s', raw));

      let pairs = 0;
      const pairsOf = (service: WalletService, tag: string, concurrency = CONCURRENCY) =>
        runLoad({
          concurrency,
          durationMs,
          warmupMs,
          op: async (worker, seq) => {
            const accountId = pick(worker, seq + 1_000_003);
            const requestId = `bench_${runTag}_${tag}_${shape}_${worker}_${seq}`;
            await service.hold({ accountId, requestId, amount: HOLD });
            const settled = await service.settle({ accountId, requestId, amount: COST });
            if (settled.charged !== COST) throw new Error(`settle charged ${settled.charged} instead of ${COST}`);
            pairs++;
          },
        });
      const paired = await pairsOf(wallet, 'n');
      rows.push(...rowsFor(scenario, 'hold+settle (plain WalletService)', 'pairs/s', paired));
      const batchedPairs = await pairsOf(batched, 'b');
      rows.push(...rowsFor(scenario, 'hold+settle (batched WalletService, as in the core)', 'pairs/s', batchedPairs));
      const widePairs = await pairsOf(batched, 'w', WIDE_CONCURRENCY);
      rows.push(
        ...rowsFor(scenario, `hold+settle (batched WalletService, c=${WIDE_CONCURRENCY})`, 'pairs/s', widePairs),
      );
      // What a metered call writes: its hold, then its charge and its usage record, through the
      // meter and the wallet and recorder the core wires into it.
      const meter = createMeter({
        wallet: batched,
        usage: createUsageRecorder({ store, now: Date.now }),
        logger: pino({ level: 'silent' }),
        now: Date.now,
        holdTtlSeconds: 600,
      });
      let meteredCalls = 0;
      const metered = await runLoad({
        concurrency: CONCURRENCY,
        durationMs,
        warmupMs,
        op: async (worker, seq) => {
          const accountId = pick(worker, seq + 2_000_003);
          const principal: Principal = {
            accountId,
            keyId: 'key_bench',
            scope: 'all',
            manage: false,
            lineageId: 'lin_bench',
            capped: false,
          };
          const requestId = `bench_${runTag}_m_${shape}_${worker}_${seq}`;
          const call = await meter.begin({
            principal,
            requestId,
            kind: 'tool',
            resource: 'bench_tool',
            provider: 'bench',
            maxCost: HOLD,
          });
          const billing = await call.finish({ cost: COST, status: 'ok' });
          if (billing.cost !== COST) throw new Error(`the meter charged ${billing.cost} instead of ${COST}`);
          pairs++;
          meteredCalls++;
        },
      });
      rows.push(...rowsFor(scenario, 'hold+settle+usage record (meter, as in the core)', 'calls/s', metered));

      // The numbers only count if the money adds up: every update took 1, every pair took COST,
      // and no hold is left behind.
      const after = await Promise.all(accounts.map((id) => balanceOf(store, id)));
      const spent = before.reduce((a, b) => a + b, 0n) - after.reduce((a, b) => a + b, 0n);
      const expected = BigInt(updates) + BigInt(pairs) * COST;
      if (spent !== expected) throw new Error(`${scenario}: wallets lost ${spent} credits, expected ${expected}`);
      const held = await store.db
        .selectFrom('wallets')
        .select(sql<bigint>`SUM(held)`.as('held'))
        .where('account_id', 'in', accounts)
        .executeTakeFirstOrThrow();
      if (BigInt(held.held) !== 0n) throw new Error(`${scenario}: ${held.held} credits still held after the run`);
      const recorded = await store.db
        .selectFrom('usage_records')
        .select([sql<bigint>`COUNT(*)`.as('n'), sql<bigint | null>`SUM(cost)`.as('cost')])
        .where('request_id', 'like', `bench_${runTag}_m_${shape}_%`)
        .executeTakeFirstOrThrow();
      if (BigInt(recorded.n) !== BigInt(meteredCalls) || BigInt(recorded.cost ?? 0n) !== BigInt(meteredCalls) * COST)
        throw new Error(`${scenario}: ${meteredCalls} metered calls, ${recorded.n} usage records of ${recorded.cost}`);
      console.log(
        `  ${scenario}: ${raw.opsPerSecond.toFixed(0)} updates/s, ${paired.opsPerSecond.toFixed(0)} pairs/s, batched ${batchedPairs.opsPerSecond.toFixed(0)} pairs/s (c=${WIDE_CONCURRENCY}: ${widePairs.opsPerSecond.toFixed(0)}), metered ${metered.opsPerSecond.toFixed(0)} calls/s`,
      );
    }
  } finally {
    await store.close();
  }
  return rows;
}

/** Runs the wallet benchmark on SQLite and on MariaDB (`SVC_BENCH_MYSQL_URL`). */
export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const mysqlUrl = process.env['SVC_BENCH_MYSQL_URL'] ?? DEFAULT_MYSQL_URL;
  // MariaDB first, so that an unusable server fails the scenario before minutes of SQLite work.
  let mariadb: Target;
  try {
    mariadb = await mariadbTarget(mysqlUrl);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`MariaDB at ${maskUrl(mysqlUrl)} is not usable (${message}); set SVC_BENCH_MYSQL_URL`, {
      cause: error,
    });
  }
  const rows: BenchRow[] = [];
  const sqlite = await sqliteTarget();
  try {
    rows.push(...(await benchTarget(sqlite, opts)));
  } finally {
    await sqlite.cleanup();
  }
  try {
    rows.push(...(await benchTarget(mariadb, opts)));
  } finally {
    await mariadb.cleanup();
  }
  return rows;
}
