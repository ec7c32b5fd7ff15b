import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { openStore, type Store } from '../../core/store/db';

const PAGE = 4096;

async function until(read: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i += 1) {
    if (read()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} never happened`);
}

describe('SQLite WAL checkpoints in a background thread (svc serve, svc core)', () => {
  let dir: string;
  let file: string;
  let store: Store | undefined;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-checkpoint-'));
    file = path.join(dir, 'svc.db');
  });

  afterEach(async () => {
    await store?.close();
    store = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function writeBlobs(s: Store, rows: number, perTransaction: number, pauseMs = 0): Promise<void> {
    const blob = 'x'.repeat(PAGE);
    for (let i = 0; i < rows; i += perTransaction) {
      await s.db.transaction().execute(async (trx) => {
        for (let j = i; j < i + perTransaction; j += 1)
          await sql`insert into blobs (id, body) values (${j}, ${blob})`.execute(trx);
      });
      // Like a server between requests: the loop turns, so the thread's results are heard.
      await new Promise((r) => (pauseMs === 0 ? setImmediate(r) : setTimeout(r, pauseMs)));
    }
  }

  it('copies committed pages into the database file without the writer checkpointing', async () => {
    store = openStore(`sqlite:${file}`, { backgroundCheckpoint: true });
    await sql`create table blobs (id integer primary key, body text not null)`.execute(store.db);
    // The writer's own automatic checkpoint is off: only the thread can move pages into the file.
    const [auto] = (await sql<{ wal_autocheckpoint: bigint }>`pragma wal_autocheckpoint`.execute(store.db)).rows;
    assert.equal(Number(auto?.wal_autocheckpoint), 0);
    const before = fs.statSync(file).size;
    await writeBlobs(store, 200, 10);
    // 200 rows of a page each were committed to the WAL; the database file grows once a
    // checkpoint copies them, which nothing but the background thread does here.
    await until(() => fs.statSync(file).size > before + 150 * PAGE, 'a background checkpoint');
    const count = await sql<{ n: bigint }>`select count(*) as n from blobs`.execute(store.db);
    assert.equal(Number(count.rows[0]?.n), 200);
  });

  it('keeps the WAL bounded under writes that never pause, and loses nothing', async () => {
    store = openStore(`sqlite:${file}`, { backgroundCheckpoint: true });
    await sql`create table blobs (id integer primary key, body text not null)`.execute(store.db);
    // 12,000 pages and more (a row and its overflow per page), three times the WAL's limit, at
    // a pace of ~4,000 pages a second: a busy server's worth (a page or two per request).
    await writeBlobs(store, 12_000, 20, 5);
    const wal = fs.statSync(`${file}-wal`).size;
    assert.ok(wal < 9_000 * PAGE, `the WAL grew to ${Math.round(wal / PAGE)} pages: it never started over`);
    await store.close();
    store = openStore(`sqlite:${file}`);
    const count = await sql<{ n: bigint }>`select count(*) as n from blobs`.execute(store.db);
    assert.equal(Number(count.rows[0]?.n), 12_000);
  });

  it('never checkpoints on the writer\'s own connection (its event loop) while the thread runs', async () => {
    // Every pragma of this process's connections: the thread's run in a worker thread of their own.
    const pragma = BetterSqlite3.prototype.pragma;
    const checkpoints: string[] = [];
    BetterSqlite3.prototype.pragma = function counted(this: BetterSqlite3.Database, source: string, options?: never) {
      if (source.includes('checkpoint(')) checkpoints.push(source);
      return pragma.call(this, source, options) as unknown;
    } as typeof pragma;
    try {
      store = openStore(`sqlite:${file}`, { backgroundCheckpoint: true });
      await sql`create table blobs (id integer primary key, body text not null)`.execute(store.db);
      // Past the WAL's limit twice over, at a busy server's pace: the WAL must start over, and
      // only the thread's RESTART checkpoint (the writer's transactions wait for it) may do that.
      await writeBlobs(store, 9_000, 20, 5);
      const wal = fs.statSync(`${file}-wal`).size;
      assert.ok(wal < 9_000 * PAGE, `the WAL grew to ${Math.round(wal / PAGE)} pages: it never started over`);
      assert.deepEqual(checkpoints, []);
    } finally {
      BetterSqlite3.prototype.pragma = pragma;
    }
  });

  it('stops its thread on close, and a store without it checkpoints as SQLite does by default', async () => {
    const background = openStore(`sqlite:${file}`, { backgroundCheckpoint: true });
    await background.close();
    store = openStore(`sqlite:${file}`);
    const [auto] = (await sql<{ wal_autocheckpoint: bigint }>`pragma wal_autocheckpoint`.execute(store.db)).rows;
    assert.equal(Number(auto?.wal_autocheckpoint), 1000);
  });
});
