import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { fuzzParams, walletSnapshot } from './fuzz-kit';

interface RawAnswer {
  readonly status: number;
  readonly headers: string;
  readonly body: string;
}

/**
 * Sends `head` and then `body` over a raw socket, `chunk` bytes at a time with `pauseMs` between
 * writes (a slow client), and reads the whole answer (the server closes: `connection: close`).
 */
function rawRequest(port: number, head: string, body: Buffer, chunk: number, pauseMs: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (d) => received.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(received).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const headers = split < 0 ? text : text.slice(0, split);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0);
      resolve({ status, headers, body: split < 0 ? '' : text.slice(split + 4) });
    });
    socket.on('connect', () => {
      void (async () => {
        socket.write(head);
        for (let i = 0; i < body.length && !socket.destroyed; i += chunk) {
          socket.write(body.subarray(i, i + chunk));
          if (pauseMs > 0) await sleep(pauseMs);
        }
      })();
    });
  });
}

function head(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries({ host: '127.0.0.1', connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}`);
  return `${method} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

/** De-chunks a `transfer-encoding: chunked` body, or returns it as is. */
function bodyOf(answer: RawAnswer): string {
  if (!/transfer-encoding: chunked/i.test(answer.headers)) return answer.body;
  let out = '';
  let rest = answer.body;
  for (;;) {
    const nl = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, nl), 16);
    if (!(size > 0)) return out;
    out += rest.slice(nl + 2, nl + 2 + size);
    rest = rest.slice(nl + 2 + size + 2);
  }
}

const chatBody = Buffer.from(
  JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'slow hello' }], max_tokens: 8 }),
);
const mcpBody = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'shopping_search', arguments: { query: 'laptop' } },
  }),
);

describe('fuzz: HTTP transport (slow clients, oversized and odd headers)', function () {
  this.timeout(300_000);
  let svc: TestSvc;
  let funded: FundedKey;
  let port: number;

  before(async () => {
    svc = await startSvc({ maxBodyBytes: 64 * 1024 });
    funded = await svc.createFundedKey(10_000_000n, 'fuzz-transport');
    port = Number(new URL(svc.baseUrl).port);
  });
  after(async () => {
    await svc?.close();
  });

  it('a body sent one byte at a time with pauses is served whole and charged once', async () => {
    const before = await svc.ledger(funded.accountId, 1000);
    const answer = await rawRequest(
      port,
      head('POST', '/v1/openai/chat/completions', {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        'content-length': chatBody.length,
      }),
      chatBody,
      1,
      2,
    );
    assert.equal(answer.status, 200, answer.body);
    assert.equal((JSON.parse(bodyOf(answer)) as { object: string }).object, 'chat.completion');
    const mcp = await rawRequest(
      port,
      head('POST', '/v1/mcp', {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'content-length': mcpBody.length,
      }),
      mcpBody,
      3,
      1,
    );
    assert.equal(mcp.status, 200, mcp.body);
    const after = await svc.ledger(funded.accountId, 1000);
    assert.equal(after.length - before.length, 2, 'one charge each');
  });

  it('random chunking and pauses never change the answer to a bad body: a 400 in the right shape, no charge', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('{"model":', '{"model":"svc-pro","messages":"x"}', '[1,2,3]', '\u00ff\u00fe'),
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 0, max: 3 }),
        async (text, chunk, pause) => {
          const body = Buffer.from(text, 'latin1');
          const answer = await rawRequest(
            port,
            head('POST', '/v1/openai/chat/completions', {
              authorization: `Bearer ${funded.key}`,
              'content-type': 'application/json',
              'content-length': body.length,
            }),
            body,
            chunk,
            pause,
          );
          assert.equal(answer.status, 400, answer.body);
          const error = (JSON.parse(bodyOf(answer)) as { error: { type: string } }).error;
          assert.equal(error.type, 'invalid_request_error');
        },
      ),
      fuzzParams(15),
    );
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('a client that declares a body and stops sending does not block anyone, and leaves nothing behind when it goes', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const stalled = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => stalled.once('connect', resolve));
    stalled.write(
      head('POST', '/v1/openai/chat/completions', {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        'content-length': chatBody.length,
      }),
    );
    stalled.write(chatBody.subarray(0, 10));
    // Meanwhile others are served.
    const res = await fetch(`${svc.baseUrl}/v1/openai/models`, { headers: { authorization: `Bearer ${funded.key}` } });
    assert.equal(res.status, 200);
    const closed = new Promise((resolve) => stalled.once('close', resolve));
    stalled.destroy();
    await closed;
    // The cut request reaches no core call: nothing held, nothing charged.
    const models = await fetch(`${svc.baseUrl}/v1/openai/models`, {
      headers: { authorization: `Bearer ${funded.key}` },
    });
    assert.equal(models.status, 200);
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('a declared Content-Length past the limit is a 413 before any byte of the body is read', async () => {
    const answer = await rawRequest(
      port,
      head('POST', '/v1/openai/chat/completions', {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        'content-length': 10 * 1024 * 1024,
      }),
      Buffer.alloc(0),
      1,
      0,
    );
    assert.equal(answer.status, 413);
    assert.equal((JSON.parse(bodyOf(answer)) as { error: { code: string } }).error.code, 'request_too_large');
  });

  it('oversized headers are refused by the HTTP parser (431), many or odd headers are served or refused in shape, and the server keeps serving', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const huge = await rawRequest(
      port,
      head('GET', '/v1/openai/models', { authorization: `Bearer ${funded.key}`, 'x-pad': 'p'.repeat(64 * 1024) }),
      Buffer.alloc(0),
      1,
      0,
    );
    assert.equal(huge.status, 431);
    const hugeKey = await rawRequest(
      port,
      head('GET', '/v1/openai/models', { authorization: `Bearer svc_sk_${'A'.repeat(12_000)}` }),
      Buffer.alloc(0),
      1,
      0,
    );
    assert.equal(hugeKey.status, 401, hugeKey.body);
    const many: Record<string, string> = { authorization: `Bearer ${funded.key}` };
    for (let i = 0; i < 3000; i++) many[`x-h${i}`] = 'v';
    const manyAnswer = await rawRequest(port, head('GET', '/v1/openai/models', many), Buffer.alloc(0), 1, 0);
    assert.ok([200, 431].includes(manyAnswer.status), `many headers: ${manyAnswer.status}`);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/v1/openai/models', '/v1/openai/chat/completions', '/v1/mcp'),
        fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 2000 }),
        fc.constantFrom(
          'authorization',
          'content-type',
          'accept',
          'x-request-id',
          'idempotency-key',
          'mcp-protocol-version',
          'origin',
          'content-encoding',
        ),
        async (path, value, name) => {
          const body = path === '/v1/mcp' ? mcpBody : chatBody;
          const headers = {
            authorization: `Bearer ${funded.key}`,
            'content-type': 'application/json',
            'content-length': body.length,
            [name]: value,
          };
          const answer = await rawRequest(
            port,
            head(path.endsWith('models') ? 'GET' : 'POST', path, headers),
            path.endsWith('models') ? Buffer.alloc(0) : body,
            4096,
            0,
          );
          assert.ok(answer.status > 0 && answer.status !== 500, `${name}: ${value} → ${answer.status} ${answer.body}`);
          if (answer.status >= 400)
            assert.doesNotThrow(() => JSON.parse(bodyOf(answer)) as unknown, `${name} → ${answer.status} is JSON`);
        },
      ),
      fuzzParams(40),
    );
    const ok = await fetch(`${svc.baseUrl}/v1/openai/models`, { headers: { authorization: `Bearer ${funded.key}` } });
    assert.equal(ok.status, 200);
    // Some of the fuzzed requests may have been valid paid calls; the books still balance.
    const w = await svc.wallet(funded.accountId);
    const entries = await svc.ledger(funded.accountId, 1000);
    assert.equal(
      w.balance,
      entries.reduce((s, e) => s + e.amount, 0n),
    );
    assert.equal(w.held, 0n);
    assert.ok(before.length > 0);
  });
});
