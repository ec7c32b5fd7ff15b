import BetterSqlite3 from 'better-sqlite3';
import {
  type CompiledQuery,
  Kysely,
  Migrator,
  MysqlDialect,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type LogEvent,
} from 'kysely';
import type * as Mysql2 from 'mysql2';
import type { TypeCastField } from 'mysql2';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { migrationProvider } from './migrations';
import type { Database } from './schema';
import { maskUrl, parseDatabaseUrl, type Dialect } from './url';

export { maskUrl, parseDatabaseUrl, type Dialect } from './url';

/** An open database: the query builder plus what differs between the two stores. */
export interface Store {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  /** The URL with any password masked, for logs and messages. */
  readonly displayUrl: string;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** MySQL pool size (default 10). */
  readonly poolSize?: number;
  /**
   * SQLite file: checkpoint the WAL from a background thread instead of in the commit that
   * crosses SQLite's threshold (the long-running `svc serve` / `svc core`; see `startCheckpointer`).
   */
  readonly backgroundCheckpoint?: boolean;
  /**
   * SQLite file: open it only if it exists (a `DatabaseMissingError` otherwise), creating neither
   * the file nor its folder. For commands that only read or change what is already there.
   */
  readonly mustExist?: boolean;
  /**
   * SQLite file: another process checkpoints the WAL (the primary of `svc serve --workers N`,
   * see cli/cluster.ts); this connection never does, in its commits or otherwise.
   */
  readonly checkpointElsewhere?: boolean;
  /**
   * SQLite file: other processes write it at the same time (the workers of `svc serve --workers
   * N`). A transaction that finds the write lock taken waits for it without blocking the event
   * loop (`beginWhenFree`) instead of sleeping in SQLite's busy handler.
   */
  readonly otherWriters?: boolean;
}

/** A SQLite database a command expected to find is not there (`mustExist`). */
export class DatabaseMissingError extends Error {
  override readonly name = 'DatabaseMissingError';
  constructor(readonly file: string) {
    super(`no database at ${file}`);
  }
}

/** How often the background thread checkpoints, and the WAL size (frames) at which the writer finishes one itself. */
const CHECKPOINT_EVERY_MS = 250;
const WAL_FRAMES_LIMIT = 4000;

/** How long the thread waits, once it has raised its flag, before it asks for the write lock. */
const RESTART_GRACE_MS = 2;
/** How long the thread's RESTART checkpoint waits for the writer's transaction to end. */
const RESTART_BUSY_MS = 1000;

// The checkpointing thread: its own connection to the file, a PASSIVE checkpoint (never waits for
// the writer, never blocks it) on a timer, each result posted back. When the WAL has passed
// workerData.limit frames (the PASSIVE ones never caught up with a writer that never pauses), a
// RESTART checkpoint: it takes the write lock, copies the rest, syncs the file and leaves the WAL
// to start over at the next commit. Before it asks for the lock it raises the shared flag
// (workerData.busy[0]) and waits RESTART_GRACE_MS, so that the writer, which looks at the flag
// before each transaction, waits with its event loop free instead of in SQLite's busy handler;
// the flag falls when the checkpoint is done. Evaluated code, so that it runs the same from dist/
// and from the TypeScript sources.
const CHECKPOINTER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = ' + workerData.restartBusyMs);
const busy = new Int32Array(workerData.busy);
const timer = setInterval(() => {
  try {
    let [result] = db.pragma('wal_checkpoint(PASSIVE)');
    if (result.log > workerData.limit) {
      Atomics.store(busy, 0, 1);
      try {
        Atomics.wait(busy, 1, 0, workerData.graceMs);
        [result] = db.pragma('wal_checkpoint(RESTART)');
        result = { ...result, restart: true };
      } finally {
        Atomics.store(busy, 0, 0);
      }
    }
    parentPort.postMessage(result);
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.message || error) });
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

interface Checkpointer {
  /** [0] is 1 while the thread holds, or is about to ask for, the write lock. */
  readonly checkpointing: Int32Array;
  stop(): Promise<void>;
}

/**
 * A WAL checkpoint copies the pages committed since the last one into the database file and
 * syncs it: with SQLite's default (a checkpoint inside whichever commit crosses 1,000 pages)
 * that work, about half of all the time a busy svc spends in SQLite, ran on the event loop in
 * the middle of a request. Here a thread of its own does it. A PASSIVE checkpoint cannot always
 * catch up with a writer that never pauses, and the WAL only starts over once one has: when the
 * WAL passes WAL_FRAMES_LIMIT frames, the thread runs a RESTART checkpoint, which holds the write
 * lock while it copies the rest and syncs the file. The writer's transactions (and its writes
 * outside one) wait for it on the shared flag (`checkpointing`) with the event loop free, never
 * in SQLite's busy handler. (Before issue 46 the writer's own
 * connection finished that checkpoint between two transactions, on the event loop: 1.3–1.8 times
 * a second at 500 req/s, 1.6–1.8 ms each on average and up to 6 ms; docs/tail-notes.md.)
 */
function startCheckpointer(sqlite: BetterSqlite3.Database, file: string): Checkpointer {
  sqlite.pragma('wal_autocheckpoint = 0');
  const busy = new SharedArrayBuffer(8);
  const checkpointing = new Int32Array(busy);
  const worker = new Worker(CHECKPOINTER_SOURCE, {
    eval: true,
    workerData: {
      driver: require.resolve('better-sqlite3'),
      file: path.resolve(file),
      everyMs: CHECKPOINT_EVERY_MS,
      limit: WAL_FRAMES_LIMIT,
      graceMs: RESTART_GRACE_MS,
      restartBusyMs: RESTART_BUSY_MS,
      busy,
    },
  });
  worker.unref();
  let failed = false;
  worker.on('message', (result: { error?: string }) => {
    if (!sqlite.open || result.error === undefined) return;
    // The thread's checkpoint failed: the writer's connection makes it, between two transactions
    // (not inside one the query builder holds open across awaits: then on the next result).
    if (sqlite.inTransaction) return;
    sqlite.pragma('wal_checkpoint(PASSIVE)');
  });
  const fallBack = (): void => {
    // Without the thread, SQLite checkpoints in the commit again (its default).
    Atomics.store(checkpointing, 0, 0);
    if (failed || !sqlite.open) return;
    failed = true;
    sqlite.pragma('wal_autocheckpoint = 1000');
  };
  worker.on('error', fallBack);
  worker.on('exit', fallBack);
  return {
    checkpointing,
    async stop() {
      failed = true;
      if (worker.threadId === -1) return;
      // Referenced again while it stops: an unreferenced thread's exit would not keep this
      // process alive, and the caller's next steps (the last span export) would never run.
      worker.ref();
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('stop');
      const timer = setTimeout(() => void worker.terminate(), 2000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** How long a statement waits for another process's write lock before it fails SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 10_000;
/** Attempts at the write lock made on the next turn of the event loop before waiting 1 ms between them. */
const BUSY_SPINS = 8;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const oneMs = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 1));

/**
 * `begin immediate` on a file other processes write too, waiting for the write lock with the
 * event loop free. SQLite's busy handler (busy_timeout) sleeps in the calling thread, 1, 2, 5,
 * 10 ms… between attempts: with better-sqlite3 that is the whole process, so a worker of `svc
 * serve --workers 2` whose transaction met the other's spent that time serving nothing (measured:
 * 10–16% of each worker's time, ~200 sleeps of 2.4–3.7 ms in 5 s at c=32). Here the attempt is
 * made without a busy timeout and, while the lock is taken, repeated on the next turns of the
 * event loop and then every millisecond, so that the process reads requests, calls upstreams and
 * answers in between (and the operations that arrive meanwhile join the next batch). After
 * BUSY_TIMEOUT_MS it fails with SQLITE_BUSY as busy_timeout would. Other statements keep the
 * busy timeout: only a transaction's begin waits here.
 */
async function beginWhenFree(sqlite: BetterSqlite3.Database, statement: BetterSqlite3.Statement): Promise<void> {
  const begin = (): boolean => {
    // A pragma acts when it is prepared: prepared anew each time, not kept.
    sqlite.pragma('busy_timeout = 0');
    try {
      statement.run();
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return false;
      throw error;
    } finally {
      sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  };
  const started = Date.now();
  for (let attempt = 1; !begin(); attempt++) {
    if (Date.now() - started > BUSY_TIMEOUT_MS)
      throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    await (attempt <= BUSY_SPINS ? nextTurn() : oneMs());
  }
}

/** Kysely's SQLite driver whose transactions begin with `beginWhenFree`. */
class SharedFileDriver extends SqliteDriver {
  constructor(
    config: ConstructorParameters<typeof SqliteDriver>[0],
    private readonly sqlite: BetterSqlite3.Database,
  ) {
    super(config);
  }

  private begin: BetterSqlite3.Statement | undefined;

  override async beginTransaction(_connection: DatabaseConnection): Promise<void> {
    this.begin ??= this.sqlite.prepare('begin immediate');
    await beginWhenFree(this.sqlite, this.begin);
  }
}

class SharedFileDialect extends SqliteDialect {
  constructor(
    private readonly config: ConstructorParameters<typeof SqliteDialect>[0],
    private readonly sqlite: BetterSqlite3.Database,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return new SharedFileDriver(this.config, this.sqlite);
  }
}

/**
 * Waits, with the event loop free, while the checkpointing thread holds the write lock for its
 * RESTART checkpoint or is about to ask for it: on the next turns of the event loop, then every
 * millisecond. After BUSY_TIMEOUT_MS the transaction begins anyway (and waits in SQLite's busy
 * handler, as before the flag).
 */
async function whileCheckpointing(flag: Int32Array): Promise<void> {
  const started = Date.now();
  for (let attempt = 1; Atomics.load(flag, 0) === 1; attempt++) {
    if (Date.now() - started > BUSY_TIMEOUT_MS) return;
    await (attempt <= BUSY_SPINS ? nextTurn() : oneMs());
  }
}

/**
 * Kysely's SQLite driver whose writes wait for the checkpointing thread's RESTART (see
 * startCheckpointer): while its flag is up, a transaction's `begin` and a write outside any
 * transaction wait with the event loop free; reads (the WAL serves them meanwhile) and the
 * statements of a transaction already begun go on at once.
 */
class CheckpointedDriver extends SqliteDriver {
  constructor(
    config: ConstructorParameters<typeof SqliteDriver>[0],
    private readonly sqlite: BetterSqlite3.Database,
    private readonly checkpointing: Int32Array,
  ) {
    super(config);
  }

  private connection: DatabaseConnection | undefined;

  override async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await super.acquireConnection();
    const { sqlite, checkpointing } = this;
    this.connection ??= {
      executeQuery<R>(query: CompiledQuery) {
        if (Atomics.load(checkpointing, 0) === 1 && !sqlite.inTransaction && !/^\s*select\b/i.test(query.sql))
          return whileCheckpointing(checkpointing).then(() => inner.executeQuery<R>(query));
        return inner.executeQuery<R>(query);
      },
      streamQuery: (query, chunkSize) => inner.streamQuery(query, chunkSize),
    };
    return this.connection;
  }
}

class CheckpointedDialect extends SqliteDialect {
  constructor(
    private readonly config: ConstructorParameters<typeof SqliteDialect>[0],
    private readonly sqlite: BetterSqlite3.Database,
    private readonly checkpointing: Int32Array,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return new CheckpointedDriver(this.config, this.sqlite, this.checkpointing);
  }
}

// Exact integers from MySQL: BIGINT and DECIMAL (SUM) arrive as strings and become bigint.
function mysqlTypeCast(field: TypeCastField, next: () => unknown): unknown {
  if (field.type === 'LONGLONG' || field.type === 'NEWDECIMAL') {
    const text = field.string();
    if (text === null) return null;
    return /^-?\d+$/.test(text) ? BigInt(text) : text;
  }
  return next();
}

const tracer = trace.getTracer('svc.store');

// mysql2 has its own instrumentation; better-sqlite3 does not, so its queries get spans here.
function sqliteSpan(event: LogEvent): void {
  const end = Date.now();
  const span = tracer.startSpan(`sqlite ${event.query.sql.split(' ', 1)[0]?.toUpperCase() ?? 'QUERY'}`, {
    kind: SpanKind.CLIENT,
    startTime: end - event.queryDurationMillis,
    attributes: { 'db.system': 'sqlite', 'db.statement': event.query.sql },
  });
  if (event.level === 'error') span.setStatus({ code: SpanStatusCode.ERROR });
  span.end(end);
}

/** Opens the database named by `url` (SVC_DATABASE_URL syntax). Does not migrate. */
export function openStore(url: string, options: StoreOptions = {}): Store {
  const parsed = parseDatabaseUrl(url);
  if (parsed.dialect === 'sqlite') {
    const file = parsed.path ?? '';
    if (options.mustExist === true && file !== ':memory:' && !fs.existsSync(file))
      throw new DatabaseMissingError(path.resolve(file));
    if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    const sqlite = new BetterSqlite3(file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    sqlite.pragma('foreign_keys = ON');
    sqlite.defaultSafeIntegers(true);
    if (options.checkpointElsewhere === true) sqlite.pragma('wal_autocheckpoint = 0');
    const checkpointer =
      options.backgroundCheckpoint === true && file !== ':memory:' && file !== ''
        ? startCheckpointer(sqlite, file)
        : undefined;
    // Kysely prepares every query anew; better-sqlite3 statements are reusable, and preparing
    // is a large share of a short query's cost, so keep the prepared ones (Kysely runs one
    // query at a time on this connection, so a statement is never in use twice).
    const statements = new Map<string, BetterSqlite3.Statement>();
    const database = {
      close: () => sqlite.close(),
      prepare(query: string): BetterSqlite3.Statement {
        // A transaction takes the write lock when it begins. A deferred one (Kysely's plain
        // `begin`) reads first and asks for the lock at its first write: when another process
        // (`svc serve --workers N`, a CLI command) committed in between, its snapshot is stale
        // and SQLite fails the write at once with SQLITE_BUSY, whatever the busy timeout. An
        // immediate one waits its turn under busy_timeout instead. In one process nothing
        // changes: Kysely runs one transaction at a time on this connection.
        const text = query === 'begin' ? 'begin immediate' : query;
        let statement = statements.get(text);
        if (statement === undefined) {
          statement = sqlite.prepare(text);
          if (statements.size >= 2000) statements.delete(statements.keys().next().value as string);
          statements.set(text, statement);
        }
        return statement;
      },
    };
    const dialect =
      options.otherWriters === true
        ? new SharedFileDialect({ database }, sqlite)
        : checkpointer !== undefined
          ? new CheckpointedDialect({ database }, sqlite, checkpointer.checkpointing)
          : new SqliteDialect({ database });
    const db = new Kysely<Database>({ dialect, log: sqliteSpan });
    return {
      db,
      dialect: 'sqlite',
      displayUrl: url,
      close: async () => {
        await checkpointer?.stop();
        await db.destroy();
      },
    };
  }
  const u = parsed.url as URL;
  // Required only for a MySQL store: a SQLite one never loads the driver (~2.5 MiB of heap).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { createPool } = require('mysql2') as typeof Mysql2;
  const pool = createPool({
    host: u.hostname,
    port: u.port === '' ? 3306 : Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: decodeURIComponent(u.pathname.slice(1)),
    connectionLimit: options.poolSize ?? 10,
    supportBigNumbers: true,
    bigNumberStrings: true,
    typeCast: mysqlTypeCast,
    charset: 'utf8mb4',
    enableKeepAlive: true,
  });
  const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool }) });
  return { db, dialect: 'mysql', displayUrl: maskUrl(url), close: () => db.destroy() };
}

/** Applies pending migrations; throws with the failing migration's name. */
export async function migrate(store: Store): Promise<string[]> {
  const migrator = new Migrator({ db: store.db, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`migration ${failed?.migrationName ?? ''} failed on ${store.displayUrl}: ${reason}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** True when the error is a unique-key violation in either store. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; errno?: unknown };
  return (
    e.code === 'ER_DUP_ENTRY' || e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  );
}
