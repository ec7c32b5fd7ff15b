/*
 * One of the processes of test/wallet/sqlite-processes.test.ts: the wallet svc runs (batched, as
 * createCore builds it) on a SQLite file another process writes at the same time. Holds and
 * settles LOOPS × ROUNDS calls on one account, then prints what it did as one JSON line.
 * Each round also runs the shape of transaction every part of svc may use: read a row, wait a
 * turn of the event loop, write what it read plus one (the `workers_counter` table the test made).
 * Usage: node --require tsx/cjs sqlite-writer.ts URL ACCOUNT PREFIX LOOPS ROUNDS
 */
import { setImmediate as tick } from 'node:timers/promises';
import { sql } from 'kysely';
import { createBatchedWalletService } from '../../core/wallet/batched';
import { openStore } from '../../core/store/db';

async function main(): Promise<void> {
  const [url, accountId, prefix, loops, rounds] = process.argv.slice(2);
  // Like a worker of `svc serve --workers N`: the checkpoints are another process's business, and
  // a transaction waits for the others' write lock with the event loop free.
  const store = openStore(url ?? '', { checkpointElsewhere: true, otherWriters: true });
  const wallet = createBatchedWalletService({ store, now: Date.now, holdTtlSeconds: 600 });
  const errors: string[] = [];
  let settled = 0n;
  let calls = 0;
  await Promise.all(
    Array.from({ length: Number(loops) }, async (_, loop) => {
      for (let round = 0; round < Number(rounds); round += 1) {
        const requestId = `${prefix}_${loop}_${round}`;
        try {
          await wallet.hold({ accountId: accountId ?? '', requestId, amount: 9n });
          const amount = BigInt(1 + ((loop + round) % 7));
          await wallet.settle({ accountId: accountId ?? '', requestId, amount });
          settled += amount;
          await store.db.transaction().execute(async (trx) => {
            const row = await sql<{ n: bigint }>`select n from workers_counter where id = 1`.execute(trx);
            await tick();
            await sql`update workers_counter set n = ${(row.rows[0]?.n ?? 0n) + 1n} where id = 1`.execute(trx);
          });
          calls += 1;
        } catch (error) {
          const e = error as { code?: unknown; message?: unknown };
          errors.push(`${String(e.code)}: ${String(e.message)}`);
        }
      }
    }),
  );
  await store.close();
  process.stdout.write(`${JSON.stringify({ calls, settled: settled.toString(), errors })}\n`);
}

void main();
