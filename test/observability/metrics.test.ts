import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import pino from 'pino';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRegistry } from '../../core/metrics/registry';
import { runSvc, svcJson } from '../cli/run-svc';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { startSvc, type TestSvc } from '../helpers/harness';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { parsePrometheusText } from './prometheus';

describe('metrics registry (Prometheus text)', () => {
  it('renders counters, gauges and histograms that a strict parser accepts', async () => {
    const registry = createRegistry();
    const c = registry.counter('t_requests_total', 'Requests.\nTwo lines.', ['route', 'status']);
    c.inc({ route: '/a "quoted" \\ path\nx', status: '200' });
    c.inc({ route: '/a "quoted" \\ path\nx', status: '200' }, 2);
    c.inc({ route: '/b', status: '500' });
    registry.gauge('t_open', 'Open things.').set({}, 3);
    const h = registry.histogram('t_seconds', 'Durations.', ['route'], [0.1, 1]);
    h.observe({ route: '/a' }, 0.05);
    h.observe({ route: '/a' }, 0.5);
    h.observe({ route: '/a' }, 7);
    const families = parsePrometheusText(await registry.render());
    const requests = families.get('t_requests_total');
    assert.equal(requests?.type, 'counter');
    assert.equal(requests?.help, 'Requests.\\nTwo lines.');
    assert.deepEqual(
      requests?.samples.map((s) => [s.labels['route'], s.value]),
      [
        ['/a "quoted" \\ path\nx', 3],
        ['/b', 1],
      ],
    );
    const seconds = families.get('t_seconds')?.samples ?? [];
    assert.deepEqual(
      seconds.filter((s) => s.name === 't_seconds_bucket').map((s) => [s.labels['le'], s.value]),
      [
        ['0.1', 1],
        ['1', 2],
        ['+Inf', 3],
      ],
    );
    assert.equal(seconds.find((s) => s.name === 't_seconds_count')?.value, 3);
    assert.equal(seconds.find((s) => s.name === 't_seconds_sum')?.value, 7.55);
    assert.equal(families.get('t_open')?.samples[0]?.value, 3);
  });

  it('keeps credit counters exact past 2^53', async () => {
    const registry = createRegistry();
    const credits = registry.counter('t_credits_total', 'Credits.');
    credits.inc({}, 2n ** 53n);
    credits.inc({}, 1n);
    credits.inc({}, 1);
    assert.match(await registry.render(), /^t_credits_total 9007199254740994$/m);
  });

  it('refuses programming mistakes: an undeclared label, a counter going down, a name used twice', () => {
    const registry = createRegistry();
    const c = registry.counter('t_total', 'x', ['a']);
    assert.throws(() => c.inc({ b: '1' }), /no label "b"/);
    assert.throws(() => c.inc({ a: '1' }, -1), /cannot go down/);
    assert.throws(() => registry.gauge('t_total', 'again'), /registered twice/);
  });

  it('renders and exports the families of an included source (the core thread) after its own', async () => {
    const core = createRegistry();
    core.counter('t_charged_total', 'Charged.', ['model']).inc({ model: 'svc-pro' }, 2n ** 53n + 1n);
    const h = core.histogram('t_core_seconds', 'Core.', ['method'], [0.1, 1]);
    h.observe({ method: 'Chat' }, 0.1);
    h.observe({ method: 'Chat' }, 3);
    const gateway = createRegistry();
    gateway.gauge('t_open', 'Open.').set({}, 1);
    gateway.include(() => core.snapshot());
    gateway.include(() => Promise.reject(new Error('thread gone')));
    const text = await gateway.render();
    const families = parsePrometheusText(text);
    assert.equal(families.get('t_open')?.samples[0]?.value, 1);
    assert.match(text, /^t_charged_total\{model="svc-pro"\} 9007199254740993$/m);
    assert.deepEqual(
      families
        .get('t_core_seconds')
        ?.samples.filter((s) => s.name === 't_core_seconds_bucket')
        .map((s) => [s.labels['le'], s.value]),
      [
        ['0.1', 1],
        ['1', 1],
        ['+Inf', 2],
      ],
    );
    assert.match(text, /^svc_metrics_collect_errors 1$/m);
    assert.deepEqual(
      (await gateway.snapshot()).map((f) => f.name),
      ['t_open', 't_charged_total', 't_core_seconds'],
    );
  });

  it('reports a failing collector in the scrape instead of failing it', async () => {
    const registry = createRegistry();
    registry.onCollect(() => Promise.reject(new Error('database down')));
    const families = parsePrometheusText(await registry.render());
    assert.equal(families.get('svc_metrics_collect_errors')?.samples[0]?.value, 1);
  });
});

describe('request log and metrics of the in-process gateway (tracing off)', function () {
  let svc: TestSvc;
  const lines: Record<string, unknown>[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    svc = await startSvc({ logger: pino({ level: 'info' }, sink) });
  });

  after(async () => {
    await svc?.close();
  });

  const requestLines = (): Record<string, unknown>[] => lines.filter((l) => l['msg'] === 'request');

  it('logs one line per request, with the account, key and cost the core reported', async () => {
    const funded = await svc.createFundedKey(100_000);
    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: funded.key, maxRetries: 0 });
    const { response } = await openai.chat.completions
      .create({ model: 'svc-pro', messages: [{ role: 'user', content: 'a secret prompt' }] })
      .withResponse();
    const requestId = response.headers.get('x-request-id');
    const bad = await fetch(`${svc.baseUrl}/v1/openai/models`, {
      headers: { authorization: 'Bearer svc_sk_not_a_real_key' },
    });
    assert.equal(bad.status, 401);
    const charge = (await svc.ledger(funded.accountId)).find((e) => e.kind === 'charge' && e.requestId === requestId);
    assert.ok(charge);

    const mine = requestLines().filter((l) => l['requestId'] === requestId);
    assert.equal(mine.length, 1);
    const line = mine[0] as Record<string, unknown>;
    assert.equal(line['accountId'], funded.accountId);
    assert.equal(line['keyId'], funded.keyId);
    assert.equal(line['route'], '/v1/openai/chat/completions');
    assert.equal(line['status'], 200);
    assert.equal(line['cost'], Number(-charge.amount));
    assert.equal(line['traceId'], undefined, 'no trace id when tracing is off');
    const refused = requestLines().find((l) => l['requestId'] === bad.headers.get('x-request-id'));
    assert.equal(refused?.['status'], 401);
    assert.equal(refused?.['accountId'], undefined);
    const everything = JSON.stringify(lines);
    assert.ok(
      !everything.includes('svc_sk_') && !everything.includes('a secret prompt'),
      'a key or a prompt was logged',
    );
  });

  it("labels routes by the routers' templates, never by raw path", async () => {
    const { key } = await svc.createFundedKey(0);
    const headers = { authorization: `Bearer ${key}` };
    // The line is written when the response has finished: the request's own, or (outside the
    // adapters, which mint no request id) the next one.
    const routeFor = async (method: string, path: string): Promise<unknown> => {
      const count = requestLines().length;
      const res = await fetch(`${svc.baseUrl}${path}`, { method, headers });
      await res.arrayBuffer();
      const id = res.headers.get('x-request-id');
      for (let i = 0; i < 100; i++) {
        const line = id === null ? requestLines()[count] : requestLines().find((l) => l['requestId'] === id);
        if (line !== undefined) return line['route'];
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return undefined;
    };
    assert.equal(await routeFor('GET', '/v1/openai/responses/resp_123?x=1'), '/v1/openai/responses/:id');
    assert.equal(await routeFor('GET', '/v1/openai/models/org/model'), '/v1/openai/models/{*id}');
    assert.equal(await routeFor('GET', '/v1/openai/models/'), '/v1/openai/models');
    assert.equal(await routeFor('GET', '/v1/openai/no-such-thing'), '/v1/openai/other');
    assert.equal(await routeFor('POST', '/v1/openai/embeddings'), '/v1/openai/embeddings');
    assert.equal(await routeFor('GET', '/v1/anthropic/v1/models'), '/v1/anthropic/v1/models');
    assert.equal(
      await routeFor('POST', '/v1/gemini/v1beta/models/svc-pro:generateContent?key=x'),
      '/v1/gemini/models/{model}:generateContent',
    );
    assert.equal(await routeFor('POST', '/v1/mcp'), '/v1/mcp');
    assert.equal(await routeFor('GET', '/wp-admin/../../etc/passwd'), 'other');
  });

  it('keeps probes and scrapes out of the info log, and counts them', async () => {
    const before = requestLines().length;
    assert.equal((await fetch(`${svc.baseUrl}/healthz`)).status, 200);
    const text = await (
      await fetch(`${svc.baseUrl}/metrics`, { headers: { authorization: `Bearer ${svc.adminToken}` } })
    ).text();
    assert.equal(requestLines().length, before);
    const families = parsePrometheusText(text);
    const healthz = families.get('svc_http_requests_total')?.samples.find((s) => s.labels['route'] === '/healthz');
    assert.equal(healthz?.value, 1);
    const notFound = await fetch(`${svc.baseUrl}/no/such/path`);
    assert.equal(notFound.status, 404);
    assert.ok(requestLines().some((l) => l['route'] === 'other' && l['status'] === 404));
  });
});

// Issue 20, point 12: the public port shows credits per model and tool only to the operator.
describe('GET /metrics on the public HTTP port', function () {
  let svc: TestSvc;
  let noToken: TestSvc;

  before(async () => {
    svc = await startSvc();
    noToken = await startSvc({ adminToken: null });
  });
  after(async () => {
    await noToken?.close();
    await svc?.close();
  });

  it('needs the admin token: none or a wrong one is a 401 in the OpenAI error shape, the right one the metrics', async () => {
    const funded = await svc.createFundedKey(10_000);
    for (const headers of [
      {},
      { authorization: `Bearer ${funded.key}` },
      { authorization: `Bearer ${svc.adminToken}x` },
      { authorization: svc.adminToken },
    ]) {
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(`${svc.baseUrl}/metrics`, { method, headers });
        assert.equal(res.status, 401, `${method} ${JSON.stringify(headers)}`);
        assert.equal(res.headers.get('www-authenticate'), 'Bearer');
        const body = await res.text();
        if (method === 'GET') {
          const error = (JSON.parse(body) as { error: Record<string, unknown> }).error;
          assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type']);
          assert.match(String(error['message']), /SVC_ADMIN_TOKEN/);
        }
        assert.equal(body.includes('svc_credits_charged_total'), false);
      }
    }
    const ok = await fetch(`${svc.baseUrl}/metrics`, { headers: { authorization: `Bearer ${svc.adminToken}` } });
    assert.equal(ok.status, 200);
    assert.equal(parsePrometheusText(await ok.text()).get('svc_credits_charged_total')?.type, 'counter');
  });

  it('without SVC_ADMIN_TOKEN the public port does not serve them at all', async () => {
    const res = await fetch(`${noToken.baseUrl}/metrics`);
    assert.equal(res.status, 401);
    assert.match(await res.text(), /SVC_METRICS_ADDR/);
  });
});

describe('svc serve with SVC_METRICS_ADDR', function () {
  this.timeout(60_000);
  let database: TestDatabase;
  let serve: SvcProcess | undefined;

  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    await serve?.stop();
    await database?.drop();
  });

  it('serves GET /metrics on its own listener without a credential; the public port still needs the token', async () => {
    const metricsPort = await freePort();
    const httpPort = await freePort();
    serve = await spawnSvc(
      ['serve'],
      {
        SVC_DATABASE_URL: database.url,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_METRICS_ADDR: `127.0.0.1:${metricsPort}`,
      },
      'svc is ready',
    );
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(res.status, 200);
    const families = parsePrometheusText(await res.text());
    assert.equal(families.get('svc_credits_charged_total')?.type, 'counter');
    assert.ok(families.has('svc_http_requests_total'), "the gateway's series too");
    assert.equal((await fetch(`http://127.0.0.1:${httpPort}/metrics`)).status, 401);
  });
});

describe('svc core with SVC_METRICS_ADDR', function () {
  this.timeout(60_000);
  let database: TestDatabase;
  let core: SvcProcess | undefined;

  before(async () => {
    database = await createTestDatabase();
  });

  after(async () => {
    await core?.stop();
    await database?.drop();
  });

  it('serves GET /metrics on its own listener', async () => {
    const port = await freePort();
    core = await spawnSvc(
      ['core'],
      {
        SVC_DATABASE_URL: database.url,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_METRICS_ADDR: `127.0.0.1:${port}`,
      },
      'metrics listening',
    );
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    const families = parsePrometheusText(await res.text());
    assert.equal(families.get('svc_wallet_holds_outstanding')?.samples[0]?.value, 0);
    assert.equal(families.get('svc_credits_charged_total')?.type, 'counter');
    assert.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
  });

  it('stops with a message naming a bad SVC_METRICS_ADDR', async () => {
    const run = await runSvc(['core'], {
      SVC_DATABASE_URL: database.url,
      SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
      SVC_METRICS_ADDR: 'nonsense',
    });
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /SVC_METRICS_ADDR/);
  });
});

interface OtlpDataPoint {
  attributes?: { key: string; value: { stringValue?: string } }[];
  asInt?: string | number;
  asDouble?: number;
}
interface OtlpMetric {
  name: string;
  sum?: { dataPoints: OtlpDataPoint[]; isMonotonic?: boolean };
  gauge?: { dataPoints: OtlpDataPoint[] };
  histogram?: { dataPoints: { count: string | number }[] };
}
interface OtlpMetricsExport {
  resourceMetrics: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeMetrics: { metrics: OtlpMetric[] }[];
  }[];
}

describe('OTLP metrics (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)', function () {
  this.timeout(120_000);
  let database: TestDatabase;
  let svc: SvcProcess | undefined;
  let receiver: http.Server;
  const exports: OtlpMetricsExport[] = [];

  before(async () => {
    database = await createTestDatabase();
    receiver = http.createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString('utf8')));
      req.on('end', () => {
        if (
          req.method === 'POST' &&
          req.url === '/v1/metrics' &&
          (req.headers['content-type'] ?? '').startsWith('application/json')
        ) {
          exports.push(JSON.parse(text) as OtlpMetricsExport);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  });

  after(async () => {
    await svc?.stop();
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await database?.drop();
  });

  it('pushes the same figures as GET /metrics, credits equal to the ledger', async () => {
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: database.url };
    const accountId = String((await svcJson(['account', 'create', '--name', 'otlp metrics'], env))['id']);
    const key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '100000'], env);
    const port = await freePort();
    svc = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_HTTP_ADDR: `127.0.0.1:${port}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/metrics`,
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'svc-otlp-metrics-test',
      },
      'svc is ready',
    );
    const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1/openai`, apiKey: key, maxRetries: 0 });
    for (const content of ['one', 'two'])
      await openai.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content }] });
    // A graceful stop exports once more, after the last request.
    assert.equal(await svc.stop(), 0, svc.output());
    svc = undefined;
    const last = exports[exports.length - 1];
    assert.ok(last, 'no OTLP metrics export arrived');
    const resource = last.resourceMetrics[0]?.resource.attributes.find((a) => a.key === 'service.name');
    assert.equal(resource?.value.stringValue, 'svc-otlp-metrics-test');
    const metrics = last.resourceMetrics.flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const credits = metrics.find((m) => m.name === 'svc_credits_charged_total');
    assert.equal(credits?.sum?.isMonotonic, true);
    const exported = (credits?.sum?.dataPoints ?? []).reduce((x, p) => x + Number(p.asInt ?? p.asDouble ?? 0), 0);
    const ledger = (await svcJson(['wallet', 'ledger', '--account', accountId], env))['entries'] as {
      kind: string;
      amount: number;
    }[];
    const charged = ledger.filter((e) => e.kind === 'charge').reduce((x, e) => x - e.amount, 0);
    assert.ok(charged > 0);
    assert.equal(exported, charged);
    const calls = metrics.find((m) => m.name === 'svc_http_request_duration_seconds');
    assert.ok((calls?.histogram?.dataPoints ?? []).reduce((x, p) => x + Number(p.count), 0) >= 2);
    assert.ok(metrics.some((m) => m.name === 'svc_wallet_holds_outstanding' && m.gauge !== undefined));
  });
});
