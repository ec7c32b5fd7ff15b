import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { connectionGoneSignal } from '../../adapters/http/request';

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
