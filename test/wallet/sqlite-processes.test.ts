import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { sql } from 'kysely';
import path from 'node:path';
import { createAccountService } from '../../core/accounts/service';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createWalletService } from '../../core/wallet/service';
import { bookViolations, readBooks } from '../fault/books';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

const WRITER = path.join(__dirname, 'sqlite-writer.ts');

interface WriterResult {
  readonly calls: number;
  readonly settled: string;
  readonly errors: string[];
}

function runWriter(
  url: string,
  accountId: string,
  prefix: string,
  loops: number,
  rounds: number,
): Promise<WriterResult> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--require', require.resolve('tsx/cjs'), WRITER, url, accountId, prefix, String(loops), String(rounds)],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim()) as WriterResult);
      },
    );
  });
}

// The wallet's correctness under any interleaving across replicas is tested on MariaDB; this is
// SQLite's case: several processes (`svc serve --workers N`) writing one file, every transaction
// a read then a write. Each must wait its turn (`begin immediate`, with the event loop free) and none fail.
describe('SQLite written by several processes at once (svc serve --workers)', function () {
  this.timeout(180_000);
  let database: TestDatabase;
  let store: Store;

  before(async function () {
    database = await createTestDatabase('sqlite');
    store = openStore(database.url, { backgroundCheckpoint: true });
    await migrate(store);
  });
  after(async () => {
    await store.close();
    await database.drop();
  });

  it('holds and settles from three processes on one wallet, each with a read-then-write transaction: none fails, the books are exact', async () => {
    const { id: accountId } = await createAccountService({ store, now: Date.now }).create('processes');
    const wallet = createWalletService({ store, now: Date.now });
    await wallet.topUp({ accountId, amount: 1_000_000n, reference: 'test' });
    await sql`create table workers_counter (id integer primary key, n integer not null)`.execute(store.db);
    await sql`insert into workers_counter (id, n) values (1, 0)`.execute(store.db);
    const [a, b, c] = await Promise.all([
      runWriter(database.url, accountId, 'a', 8, 40),
      runWriter(database.url, accountId, 'b', 8, 40),
      runWriter(database.url, accountId, 'c', 8, 40),
    ]);
    for (const r of [a, b, c]) assert.deepEqual(r?.errors, [], 'no call failed');
    for (const r of [a, b, c]) assert.equal(r?.calls, 8 * 40);
    const settled = [a, b, c].reduce((sum, r) => sum + BigInt(r?.settled ?? '0'), 0n);
    const books = await readBooks(store);
    assert.deepEqual(bookViolations(books, Date.now()), []);
    const row = books.wallets.find((w) => w.account_id === accountId);
    assert.equal(row?.balance, 1_000_000n - settled);
    assert.equal(row?.held, 0n);
    const counter = await sql<{ n: bigint }>`select n from workers_counter where id = 1`.execute(store.db);
    assert.equal(counter.rows[0]?.n, BigInt(3 * 8 * 40), 'every read-then-write transaction committed once');
    assert.equal(books.entries.filter((e) => e.account_id === accountId && e.kind === 'charge').length, 3 * 8 * 40);
  });
});
