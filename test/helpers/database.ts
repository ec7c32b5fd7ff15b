import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createConnection, type Connection } from 'mysql2/promise';

/** A database made for one test and dropped (or deleted) afterwards. */
export interface TestDatabase {
  readonly url: string;
  readonly dialect: 'sqlite' | 'mysql';
  /** For SQLite: the file, so tests can grep its bytes. */
  readonly file: string | undefined;
  drop(): Promise<void>;
}

/** The MySQL server under test, when SVC_TEST_MYSQL_URL is set. In CI it must be. */
export function mysqlTestUrl(): string | undefined {
  const url = process.env['SVC_TEST_MYSQL_URL'];
  return url === undefined || url === '' ? undefined : url;
}

/** The store the whole suite runs on: SVC_TEST_DATABASE=mysql, or SQLite by default. */
export function suiteDialect(): 'sqlite' | 'mysql' {
  return process.env['SVC_TEST_DATABASE'] === 'mysql' ? 'mysql' : 'sqlite';
}

/**
 * Skips the calling test (with the reason) when no MySQL server is configured, except in CI,
 * where the MySQL tests must run: there it fails instead.
 */
export function requireMysql(ctx: Mocha.Context): void {
  if (mysqlTestUrl() !== undefined) return;
  if (process.env['CI'] === 'true')
    throw new Error('SVC_TEST_MYSQL_URL must be set in CI: the MySQL tests may not be skipped');
  ctx.skip();
}

/**
 * A fresh, empty database: a temp SQLite file, or a new `svc_t_*` database on the server of
 * SVC_TEST_MYSQL_URL when `kind` is 'mysql' or when the suite runs on MySQL.
 */
export async function createTestDatabase(kind: 'default' | 'sqlite' | 'mysql' = 'default'): Promise<TestDatabase> {
  const server = mysqlTestUrl();
  const useMysql = kind === 'mysql' || (kind === 'default' && suiteDialect() === 'mysql');
  if (!useMysql) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
    const file = path.join(dir, 'svc.db');
    return {
      url: `sqlite:${file}`,
      dialect: 'sqlite',
      file,
      drop: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (server === undefined) throw new Error('SVC_TEST_MYSQL_URL is not set');
  const name = `svc_t_${randomBytes(6).toString('hex')}`;
  await withMysqlServer(server, (c) => c.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`));
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    dialect: 'mysql',
    file: undefined,
    // A connection of its own: one kept open for the whole test would not outlive a server
    // restart (the fault test restarts MariaDB).
    drop: () => withMysqlServer(server, (c) => c.query(`DROP DATABASE IF EXISTS \`${name}\``)).then(() => undefined),
  };
}

/** Runs `use` on a short-lived admin connection to the MySQL server of `url` (its database part is ignored). */
export async function withMysqlServer<T>(url: string, use: (c: Connection) => Promise<T>): Promise<T> {
  const u = new URL(url);
  const connection = await createConnection({
    host: u.hostname,
    port: u.port === '' ? 3306 : Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    connectTimeout: 3000,
  });
  // The server going away must not become an uncaught 'error' on an idle connection.
  connection.on('error', () => undefined);
  try {
    return await use(connection);
  } finally {
    connection.destroy();
  }
}
