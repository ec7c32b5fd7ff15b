import assert from 'node:assert/strict';
import net from 'node:net';
import { createChannel, createClient } from 'nice-grpc';
import {
  HealthCheckResponse_ServingStatus,
  HealthDefinition,
} from 'nice-grpc-server-health/lib/proto/grpc/health/v1/health';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import BetterSqlite3 from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createConnection } from 'mysql2/promise';
import { isStoreUnreachable, storeUnavailable } from '../../core/store/outage';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';
import { startSvc, type TestSvc } from '../helpers/harness';
import { post, toolCall } from '../mcp/helpers';
import { testConfig } from '../openai/fixture';

/*
 * A store outage is a 503 (issue 48 point 6, SPEC §4): a MariaDB that cannot be reached answers
 * every wire's "unavailable, retry" shape, /readyz says not ready until it answers again, and the
 * books are exact afterwards. The database is reached through a TCP proxy this test stops and
 * starts again (the shared MariaDB server itself is never touched).
 */

/** A TCP proxy to `target` that can be stopped (every connection cut, new ones refused) and started again. */
async function startProxy(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server!.address() as net.AddressInfo).port;
  };
  await listen();
  return {
    get port() {
      return port;
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
    start: listen,
  };
}

async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('condition never became true');
}

describe('A store that cannot be reached is a 503 on every wire (MariaDB)', function () {
  this.timeout(120_000);
  let database: TestDatabase | undefined;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let upstream: FakeUpstream;
  let svc: TestSvc;

  before(async function () {
    requireMysql(this);
    database = await createTestDatabase('mysql');
    const real = new URL(database.url);
    proxy = await startProxy({ host: real.hostname, port: Number(real.port === '' ? 3306 : real.port) });
    const proxied = new URL(database.url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    upstream = await startFakeUpstream();
    // Keys are authenticated again on every call (no cache): the outage is met at once.
    svc = await startSvc({ config: testConfig(upstream.baseUrl), databaseUrl: proxied.toString(), authCacheTtlMs: 0 });
  });

  after(async () => {
    await svc?.close();
    await upstream?.close();
    await proxy?.stop().catch(() => undefined);
    await database?.drop();
  });

  it('answers each wire\'s "unavailable, retry", says not ready, and keeps the books exact', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const chat = (): Promise<Response> =>
      fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
      });
    const before = await chat();
    assert.equal(before.status, 200, await before.text());
    assert.equal((await fetch(`${svc.baseUrl}/readyz`)).status, 200);

    await proxy.stop();

    // OpenAI chat completions: 503, server_error / service_unavailable, retry-after.
    const openai = await chat();
    const openaiBody = (await openai.json()) as { error: Record<string, unknown> };
    assert.equal(openai.status, 503, JSON.stringify(openaiBody));
    assert.equal(openaiBody.error['type'], 'server_error');
    assert.equal(openaiBody.error['code'], 'service_unavailable');
    assert.equal(openai.headers.get('retry-after'), '1');

    // Responses and embeddings: the same.
    const responses = await fetch(`${svc.baseUrl}/v1/openai/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi' }),
    });
    assert.equal(responses.status, 503, await responses.text());

    // Anthropic: 529 overloaded_error, which its clients retry.
    const anthropic = await fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const anthropicBody = (await anthropic.json()) as { error: Record<string, unknown> };
    assert.equal(anthropic.status, 529, JSON.stringify(anthropicBody));
    assert.equal(anthropicBody.error['type'], 'overloaded_error');
    assert.equal(anthropic.headers.get('retry-after'), '1');

    // Gemini: 503 UNAVAILABLE with a RetryInfo.
    const gemini = await fetch(`${svc.baseUrl}/v1/gemini/v1beta/models/svc-pro:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    const geminiBody = (await gemini.json()) as { error: Record<string, unknown> };
    assert.equal(gemini.status, 503, JSON.stringify(geminiBody));
    assert.equal(geminiBody.error['status'], 'UNAVAILABLE');
    const details = geminiBody.error['details'] as Record<string, unknown>[];
    assert.ok(details.some((d) => String(d['@type']).endsWith('RetryInfo')));

    // MCP: a JSON-RPC error that says to try again.
    const mcp = await post(svc.baseUrl, toolCall('shopping_search', { query: 'tea' }), {
      authorization: `Bearer ${key}`,
    });
    const mcpError = mcp.message?.['error'] as Record<string, unknown> | undefined;
    assert.ok(mcpError !== undefined, mcp.text);
    assert.match(String(mcpError['message']), /try again/);
    assert.equal((mcpError['data'] as Record<string, unknown>)['code'], 'unavailable');

    // Not ready while the store does not answer; alive all the same (a liveness probe must not
    // restart cores for a database outage).
    const notReady = await fetch(`${svc.baseUrl}/readyz`);
    assert.equal(notReady.status, 503);
    const channel = createChannel(svc.coreAddress);
    try {
      const health = createClient(HealthDefinition, channel);
      assert.equal(
        (await health.check({ service: 'svc.ready' })).status,
        HealthCheckResponse_ServingStatus.NOT_SERVING,
      );
      assert.equal((await health.check({ service: '' })).status, HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      channel.close();
    }

    await proxy.start();
    await until(
      async () => (await fetch(`${svc.baseUrl}/readyz`)).status,
      (status) => status === 200,
    );
    const after = await until(
      async () => {
        const response = await chat();
        await response.arrayBuffer();
        return response.status;
      },
      (status) => status !== 503,
    );
    assert.equal(after, 200);

    // The books: nothing held, and the balance is the sum of the ledger (two calls charged).
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.held, 0n);
    const ledger = await svc.ledger(accountId);
    assert.equal(
      ledger.reduce((sum, e) => sum + e.amount, 0n),
      wallet.balance,
    );
    assert.equal(ledger.filter((e) => e.kind === 'charge').length, 2);
  });
});

describe('core/store/outage.ts: which store errors are an outage', function () {
  it("takes the drivers' own errors: SQLite busy past its timeout, mysql2's refused connection; nothing else", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-outage-'));
    const file = path.join(dir, 'x.db');
    const holder = new BetterSqlite3(file);
    holder.pragma('journal_mode = WAL');
    holder.prepare('create table t (x integer)').run();
    holder.prepare('begin immediate').run();
    const other = new BetterSqlite3(file, { timeout: 0 });
    let busy: unknown;
    try {
      other.prepare('insert into t values (1)').run();
    } catch (error) {
      busy = error;
    }
    holder.prepare('rollback').run();
    holder.close();
    other.close();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.ok(isStoreUnreachable(busy), String(busy));
    const mapped = storeUnavailable(busy);
    assert.equal(mapped.code, 'unavailable');
    assert.equal(mapped.details?.['retry_after_s'], 1);

    const refused = await createConnection({ host: '127.0.0.1', port: 1, user: 'x', connectTimeout: 2000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(isStoreUnreachable(refused), String(refused));
    assert.ok(isStoreUnreachable(new Error('wrapped', { cause: refused })));

    // A network error that is not the store's, a SQL error, a plain error: not an outage.
    assert.equal(isStoreUnreachable(Object.assign(new Error('fetch failed'), { code: 'ECONNREFUSED' })), false);
    assert.equal(isStoreUnreachable(Object.assign(new Error('dup'), { code: 'ER_DUP_ENTRY', fatal: false })), false);
    assert.equal(isStoreUnreachable(new Error('boom')), false);
  });
});
