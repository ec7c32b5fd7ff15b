import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import OpenAI from 'openai';
import type { Dispatcher } from 'undici';
import { createUpstreamAgent } from '../../core/providers/http';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';

/*
 * Issue 17: every upstream HTTP call goes through one undici dispatcher, and the upstream
 * latency metric is fed by an interceptor that knows each upstream by the configured name its
 * caller states, not by its URL. Two upstreams of one model on the same base URL (which a
 * URL-prefix guess cannot tell apart), a tool provider on that same origin, and an upstream
 * that refuses connections.
 */

const DURATION = 'svc_upstream_request_duration_seconds_count';

/** A TCP port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

function configText(fake: FakeUpstream, downPort: number): string {
  const origin = new URL(fake.baseUrl).origin;
  return `models:
  twin:
    price: { input_per_1m: 1000, output_per_1m: 1000 }
    upstreams:
      - provider: openai
        base_url: ${fake.baseUrl}
        api_key: key-x-0123456789
        upstream_model: model-x
        priority: 1
      - provider: openai
        base_url: ${fake.baseUrl}
        api_key: key-y-0123456789
        upstream_model: model-y
        priority: 2
  down:
    price: { input_per_1m: 1000, output_per_1m: 1000 }
    provider: openai
    base_url: http://127.0.0.1:${downPort}/v1
    api_key: key-down-0123456789
    upstream_model: model-down
    timeout_ms: 2000
tools:
  web_search:
    provider: searxng
    base_url: ${origin}
    price: 5
    timeout_ms: 2000
limits:
  requests_per_minute: 100000
`;
}

/** The sum of one metric's series whose labels include `labels` (0 when none). */
async function metric(svc: TestSvc, name: string, labels: Record<string, string>): Promise<number> {
  const text = await svc.core.metrics.registry.render();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',');
    if (want.every((w) => have.includes(w))) sum += Number(m[3]);
  }
  return sum;
}

describe('upstream HTTP: one dispatcher, timed under each upstream’s configured name (issue 17)', function () {
  this.timeout(60_000);
  let fake: FakeUpstream;
  let downPort: number;
  let svc: TestSvc | undefined;
  let agent: ReturnType<typeof createUpstreamAgent> | undefined;

  beforeEach(async () => {
    fake = await startFakeUpstream();
    downPort = await closedPort();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await agent?.close();
    agent = undefined;
    await fake.close();
  });

  /** twin (x fails with a 500, y answers), down (refused), and web_search (refused by the same origin). */
  async function exercise(s: TestSvc): Promise<void> {
    const { key } = await s.createFundedKey(1_000_000);
    const client = new OpenAI({ baseURL: `${s.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    fake.enqueue({ kind: 'http_error', status: 500 });
    const answer = await client.chat.completions.create({ model: 'twin', messages: [{ role: 'user', content: 'hi' }] });
    assert.match(answer.choices[0]?.message.content ?? '', /Hello from upstream/);
    assert.deepEqual(
      fake.requests.map((r) => r.body['model']),
      ['model-x', 'model-y'],
      'x failed first, then y answered, both on one origin',
    );
    await assert.rejects(
      client.chat.completions.create({ model: 'down', messages: [{ role: 'user', content: 'hi' }] }),
      (error: unknown) => error instanceof OpenAI.APIError && (error.status ?? 0) >= 500,
    );
    const mcp = await connectClient(s.baseUrl, key);
    try {
      const result = await mcp.callTool({ name: 'web_search', arguments: { query: 'svc' } });
      assert.equal(result.isError, true, 'the fake model server has no search endpoint');
    } finally {
      await mcp.close();
    }
  }

  async function assertTimed(s: TestSvc): Promise<void> {
    const host = new URL(fake.baseUrl).host;
    const x = `twin#1:openai@${host}`;
    const y = `twin#2:openai@${host}`;
    assert.equal(await metric(s, DURATION, { provider: 'openai', upstream: x, status: '500' }), 1);
    assert.equal(await metric(s, DURATION, { upstream: x }), 1, 'x: only its failed exchange');
    assert.equal(await metric(s, DURATION, { provider: 'openai', upstream: y, status: '200' }), 1);
    assert.equal(await metric(s, DURATION, { upstream: y }), 1, 'y: only its answer');
    assert.equal(
      await metric(s, DURATION, { upstream: `down#1:openai@127.0.0.1:${downPort}`, status: 'error' }),
      1,
      'a refused connection is counted as "error" under its upstream',
    );
    // The model server refuses the search path (HTTP 400): an answer, timed under the tool's provider.
    assert.equal(await metric(s, DURATION, { provider: 'searxng', upstream: 'searxng', status: '400' }), 1);
    assert.equal(await metric(s, DURATION, { provider: 'openai' }), 3);
    assert.equal(await metric(s, DURATION, {}), 4, 'nothing else was timed');
  }

  it('names two upstreams on one base URL apart, and counts the failed and the refused exchange', async () => {
    svc = await startSvc({ config: configText(fake, downPort) });
    await exercise(svc);
    await assertTimed(svc);
  });

  it('sends every upstream call through the dispatcher it is handed, and leaves closing it to its owner', async () => {
    agent = createUpstreamAgent();
    const seen: Array<{ origin: string; path: string }> = [];
    const watch: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
      seen.push({ origin: String(options.origin), path: options.path });
      return dispatch(options, handler);
    };
    svc = await startSvc({ config: configText(fake, downPort), dispatcher: agent.compose(watch) });
    await exercise(svc);
    await assertTimed(svc);
    const origin = new URL(fake.baseUrl).origin;
    assert.deepEqual(
      seen.map((s) => s.path.replace(/\?.*$/, '')),
      ['/v1/chat/completions', '/v1/chat/completions', '/v1/chat/completions', '/search'],
    );
    assert.deepEqual(
      seen.map((s) => s.origin),
      [origin, origin, `http://127.0.0.1:${downPort}`, origin],
    );
    await svc.close();
    svc = undefined;
    assert.equal(agent.closed, false, 'the core does not close a dispatcher it did not make');
  });
});
