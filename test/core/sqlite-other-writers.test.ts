import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { openStore, type Store } from '../../core/store/db';

// A worker of `svc serve --workers N` opens the shared SQLite file with `otherWriters`: a
// transaction that finds the write lock taken by another connection waits with the event loop
// free. Here the other writer is a second connection in this same process, which can only commit
// if the waiting one lets the event loop run: SQLite's sleeping busy handler would hold this
// thread until busy_timeout and fail with SQLITE_BUSY.
describe('SQLite with other writers (svc serve --workers): waiting for the write lock leaves the event loop free', () => {
  let dir: string;
  let shared: Store;
  let other: Store;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-writers-'));
    const url = `sqlite:${path.join(dir, 'svc.db')}`;
    other = openStore(url);
    await sql`create table t (id integer primary key, who text not null)`.execute(other.db);
    shared = openStore(url, { checkpointElsewhere: true, otherWriters: true });
  });

  afterEach(async () => {
    await shared.close();
    await other.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('begins once the other connection commits, serving the event loop meanwhile; both writes are kept', async () => {
    const events: string[] = [];
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding: () => void = () => undefined;
    const holds = new Promise<void>((resolve) => (holding = resolve));
    const first = other.db.transaction().execute(async (trx) => {
      await sql`insert into t (who) values ('other')`.execute(trx);
      events.push('other holds the write lock');
      holding();
      await held;
      events.push('other commits');
    });
    await holds;
    const second = shared.db.transaction().execute(async (trx) => {
      events.push('shared has begun');
      await sql`insert into t (who) values ('shared')`.execute(trx);
    });
    // Runs only if the waiting transaction does not hold the thread.
    setImmediate(() => {
      events.push('the event loop turned');
      release();
    });
    await Promise.all([first, second]);
    assert.deepEqual(events, [
      'other holds the write lock',
      'the event loop turned',
      'other commits',
      'shared has begun',
    ]);
    const rows = await sql<{ who: string }>`select who from t order by id`.execute(shared.db);
    assert.deepEqual(
      rows.rows.map((r) => r.who),
      ['other', 'shared'],
    );
  });

  it('keeps the busy timeout for statements outside a transaction', async () => {
    const rows = await sql<{ timeout: bigint }>`pragma busy_timeout`.execute(shared.db);
    assert.equal(Number(Object.values(rows.rows[0] ?? {})[0]), 10_000);
  });
});
