import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { getEventListeners } from 'node:events';
import { connectionGoneSignal, connectionSignalOf } from '../../adapters/http/request';
import { startOpenAiFixture } from './fixture';

// Issue 46: the chat completions path takes its client-gone signal from its connection (one
// AbortController per connection, not per request). It must fire exactly when the per-request one
// did (the response closed before it finished), and never be handed out again once it fired.
describe('connectionGoneSignal: one signal per connection, aborted when a response is left', function () {
  this.timeout(20_000);
  let server: http.Server;
  let url: string;
  const seen: AbortSignal[] = [];
  let hold: Promise<void> = Promise.resolve();

  before(async () => {
    const app = new Koa();
    app.use(async (ctx) => {
      const signal = connectionGoneSignal(ctx);
      seen.push(signal);
      if (ctx.path === '/slow') {
        // Answers only once the client has gone (or the test lets it).
        await Promise.race([hold, new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))]);
      }
      ctx.body = 'ok';
    });
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    seen.length = 0;
  });

  it('calls one after another on a kept-alive connection share one signal, never aborted by finishing', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await fetchWith(agent, '/fast');
        assert.equal(res, 'ok');
      }
      assert.equal(seen.length, 3);
      assert.equal(seen[0], seen[1]);
      assert.equal(seen[1], seen[2]);
      assert.equal(seen[0]?.aborted, false);
    } finally {
      agent.destroy();
    }
  });

  it('another connection gets another signal', async () => {
    const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const b = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await fetchWith(a, '/fast');
      await fetchWith(b, '/fast');
      assert.equal(seen.length, 2);
      assert.notEqual(seen[0], seen[1]);
    } finally {
      a.destroy();
      b.destroy();
    }
  });

  it('fires when the client leaves before the response finished, and a later connection gets a fresh one', async () => {
    let release = (): void => undefined;
    hold = new Promise((resolve) => (release = resolve));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await fetchWith(agent, '/fast');
      const first = seen[0];
      const req = http.request(`${url}/slow`, { agent });
      req.on('error', () => undefined);
      req.end();
      while (seen.length < 2) await new Promise((r) => setTimeout(r, 10));
      assert.equal(seen[1], first, 'the slow call runs on the same connection, with its signal');
      const aborted = new Promise((resolve) => first?.addEventListener('abort', resolve, { once: true }));
      req.destroy();
      await aborted;
      assert.equal(first?.aborted, true);
      await fetchWith(agent, '/fast');
      assert.equal(seen[2]?.aborted, false, 'an aborted signal is never handed out again');
      assert.notEqual(seen[2], first);
    } finally {
      release();
      hold = Promise.resolve();
      agent.destroy();
    }
  });

  function fetchWith(agent: http.Agent, path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = http.request(`${url}${path}`, { agent }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end();
    });
  }
});

/*
 * The shared signal lives as long as its connection, and a coding assistant keeps one open for
 * hours: every listener a call adds to it (the core client, the in-process channel or the
 * tunnel, the fair queue, undici) must be gone when the call ends, or they pile up.
 */
describe('connectionGoneSignal through svc: no listener outlives its call', function () {
  this.timeout(60_000);
  for (const transport of ['in-process', 'grpc'] as const)
    it(`50 calls, streamed and not, on one kept-alive connection leave no listener on its signal (${transport})`, async () => {
      const previous = process.env['SVC_TEST_TRANSPORT'];
      process.env['SVC_TEST_TRANSPORT'] = transport;
      const fx = await startOpenAiFixture().finally(() => {
        if (previous === undefined) delete process.env['SVC_TEST_TRANSPORT'];
        else process.env['SVC_TEST_TRANSPORT'] = previous;
      });
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const sockets: object[] = [];
      fx.svc.server.on('connection', (socket: object) => sockets.push(socket));
      try {
        const { key } = await fx.fund(10_000_000);
        for (let i = 0; i < 50; i++) {
          const stream = i % 2 === 1;
          const status = await new Promise<number>((resolve, reject) => {
            const req = http.request(
              `${fx.baseURL}/chat/completions`,
              {
                method: 'POST',
                agent,
                headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
              },
              (res) => {
                res.resume();
                res.on('end', () => resolve(res.statusCode ?? 0));
              },
            );
            req.on('error', reject);
            req.end(JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: `call ${i}` }], stream }));
          });
          assert.equal(status, 200);
        }
        assert.equal(sockets.length, 1, 'one kept-alive connection carried every call');
        const signal = connectionSignalOf(sockets[0]!);
        assert.ok(signal !== undefined && !signal.aborted);
        // A stream's settle runs just after its last byte: give the last call its turn.
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(getEventListeners(signal, 'abort').length, 0);
      } finally {
        agent.destroy();
        await fx.close();
      }
    });
});
