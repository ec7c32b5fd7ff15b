import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { parseConfig } from '../../core/config/load';
import { createCore } from '../../core/create-core';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { bookViolations, chargesByClientRequest, readBooks } from './books';
import { chaosModels, startChaosUpstreams, type ChaosUpstreams } from './chaos-upstream';

/** Reads an SSE chat stream to its end (or until the connection ends); what it saw. */
async function readStream(response: Response): Promise<{ text: string; done: boolean }> {
  let text = '';
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const next = await reader!.read();
      if (next.done) break;
      text += decoder.decode(next.value, { stream: true });
    }
  } catch {
    // Cut by the server's deadline: what arrived is what counts.
  }
  return { text, done: text.includes('data: [DONE]') };
}

/** Resolves once a TCP connect to `port` is refused. */
async function refused(port: number): Promise<void> {
  for (;;) {
    const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once('error', resolve);
    });
    if (error?.code === 'ECONNREFUSED') return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('graceful shutdown of svc serve (SIGTERM with streams in flight)', function () {
  this.timeout(120_000);
  let database: TestDatabase;
  let store: Store;
  let upstreams: ChaosUpstreams;
  let svc: SvcProcess | undefined;
  let dir: string;

  before(async () => {
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    // Slow streams: 8 pieces, 400 ms apart (about 3 s each), well inside the 10 s deadline.
    upstreams = await startChaosUpstreams({ pieceMs: 400, pieces: 8 });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-shutdown-'));
  });
  after(async () => {
    if (svc !== undefined) await svc.stop(2000);
    await upstreams.close();
    await store.close();
    await database.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses new connections, lets running streams finish, cuts a stuck one at the deadline and settles it, exits 0 with no hold left', async () => {
    const configText = chaosModels(upstreams, 60_000);
    const configFile = path.join(dir, 'svc.yaml');
    fs.writeFileSync(configFile, configText);
    const core = createCore({
      config: parseConfig(configText, {}, 'test'),
      store,
      logger: pino({ level: 'silent' }),
      adminToken: undefined,
    });
    const account = await core.accounts.create('shutdown');
    const { secret } = await core.keys.create({ accountId: account.id, name: 'shutdown' });
    await core.deps.wallet.topUp({ accountId: account.id, amount: 1_000_000n, reference: 'test' });
    core.stop();

    const httpPort = await freePort();
    svc = await spawnSvc(
      ['serve'],
      {
        SVC_DATABASE_URL: database.url,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_CONFIG: configFile,
      },
      'svc is ready',
    );
    const stream = (n: number, fate: string): Promise<Response> =>
      fetch(`http://127.0.0.1:${httpPort}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${secret}`,
          'content-type': 'application/json',
          'x-request-id': `req_shutdown_${n}`,
        },
        body: JSON.stringify({
          model: 'svc-pro',
          stream: true,
          stream_options: { include_usage: true },
          messages: [{ role: 'user', content: `[f:${fate}] [t:s${n}] tell me` }],
        }),
      });
    // Three slow streams and one that stalls after three pieces and would never end.
    const responses = await Promise.all([stream(1, 'slow'), stream(2, 'slow'), stream(3, 'slow'), stream(4, 'stall')]);
    for (const r of responses) assert.equal(r.status, 200);
    const reading = responses.map(readStream);

    const exited = new Promise<number | null>((resolve) => svc!.child.once('exit', (code) => resolve(code)));
    svc.child.kill('SIGTERM');
    await refused(httpPort);

    const results = await Promise.all(reading);
    assert.deepEqual(
      results.map((r) => r.done),
      [true, true, true, false],
      'the slow streams finish; the stalled one is cut',
    );
    for (const r of results.slice(0, 3)) assert.match(r.text, /"usage":\{"prompt_tokens":\d+/);
    assert.equal(await exited, 0, svc.output());
    assert.match(svc.output(), /shutting down/);

    const books = await readBooks(store);
    assert.deepEqual(bookViolations(books, Date.now()), []);
    const pending = books.holds.filter((h) => h.status === 'held');
    assert.deepEqual(pending, [], 'no pending hold');
    const charges = chargesByClientRequest(books);
    for (const n of [1, 2, 3])
      assert.equal(charges.get(`${account.id}/req_shutdown_${n}`)?.length, 1, `stream ${n} is charged once`);
    // The stalled stream pays for its prompt and the three pieces it produced, no more than its hold.
    const stalled = charges.get(`${account.id}/req_shutdown_4`);
    assert.equal(stalled?.length, 1, 'the cut stream is settled for what it produced');
    const full = charges.get(`${account.id}/req_shutdown_1`)?.[0] ?? 0n;
    assert.ok((stalled?.[0] ?? 0n) > 0n && (stalled?.[0] ?? 0n) <= full, `${String(stalled?.[0])} vs ${full}`);
  });
});
