import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { svcJson } from '../cli/run-svc';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';

const HTTP_SCOPE = '@opentelemetry/instrumentation-http';
// gRPC spans come from the gRPC instrumentation, from the in-process channel (svc serve's
// adapters calling its core in process, and the core's end of a gateway's tunnel) or from the
// gateway's tunnel (svc gateway), with the same names and rpc.* attributes.
const GRPC_SCOPES = new Set(['@opentelemetry/instrumentation-grpc', 'svc-in-process', 'svc-tunnel']);

function isHttpServer(s: ReceivedSpan): boolean {
  const target = String(s.attributes['url.path'] ?? s.attributes['http.target'] ?? '');
  return s.scope === HTTP_SCOPE && s.kind === SPAN_KIND.server && target.startsWith('/v1/openai/models');
}
const isGrpcClient = (s: ReceivedSpan): boolean => GRPC_SCOPES.has(s.scope) && s.kind === SPAN_KIND.client;
const isGrpcServer = (s: ReceivedSpan): boolean => GRPC_SCOPES.has(s.scope) && s.kind === SPAN_KIND.server;
const isDb = (s: ReceivedSpan): boolean =>
  typeof s.attributes['db.system'] === 'string' || typeof s.attributes['db.system.name'] === 'string';

/** True when `ancestor` is `span` or one of its ancestors within `spans`. */
function descendsFrom(spans: readonly ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  for (let at: ReceivedSpan | undefined = span; at !== undefined; at = byId.get(at.parentSpanId)) {
    if (at.spanId === ancestor.spanId) return true;
  }
  return false;
}

interface RequestTrace {
  readonly http: ReceivedSpan;
  readonly grpcClient: ReceivedSpan;
  readonly grpcServer: ReceivedSpan;
  readonly db: ReceivedSpan;
  readonly spans: ReceivedSpan[];
}

/** The request's trace once it holds every hop: HTTP server → gRPC client → gRPC server → database. */
function findRequestTrace(all: readonly ReceivedSpan[]): RequestTrace | undefined {
  for (const http of all.filter(isHttpServer)) {
    const spans = all.filter((s) => s.traceId === http.traceId);
    const grpcClient = spans.find((s) => isGrpcClient(s) && descendsFrom(spans, s, http));
    if (grpcClient === undefined) continue;
    const grpcServer = spans.find((s) => isGrpcServer(s) && s.parentSpanId === grpcClient.spanId);
    if (grpcServer === undefined) continue;
    const db = spans.find((s) => isDb(s) && descendsFrom(spans, s, grpcServer));
    if (db === undefined) continue;
    return { http, grpcClient, grpcServer, db, spans };
  }
  return undefined;
}

const INPUT_PER_1M = 150_000;
const OUTPUT_PER_1M = 600_000;

function configYaml(upstreamBaseUrl: string, closedPort: number): string {
  const model = (id: string, baseUrl: string): string => `  ${id}:
    provider: openai
    base_url: ${baseUrl}
    api_key: trace-upstream-secret
    upstream_model: fake-model-1
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 128000
    max_output_tokens: 1000
`;
  // Upstreams that fail before answering, each for its own reason (issue 33: the cause is logged).
  return `models:
${model('svc-pro', upstreamBaseUrl)}${model('svc-refused', `http://127.0.0.1:${closedPort}/v1`)}${model(
    'svc-no-dns',
    'http://svc-upstream.invalid/v1',
  )}${model('svc-not-tls', upstreamBaseUrl.replace('http://', 'https://'))}`;
}

const isUpstreamClient = (s: ReceivedSpan): boolean =>
  s.kind === SPAN_KIND.client &&
  !GRPC_SCOPES.has(s.scope) &&
  String(s.attributes['url.full'] ?? s.attributes['http.url'] ?? '').includes('/chat/completions');

describe('tracing through svc serve (one trace per request)', function () {
  let receiver: OtlpReceiver;
  let upstream: FakeUpstream;
  let svc: SvcProcess | undefined;
  let dir: string;
  let database: TestDatabase;
  let httpUrl: string;
  let key: string;
  let accountId: string;
  let keyId: string;

  before(async function () {
    this.timeout(120_000);
    receiver = await startOtlpReceiver();
    upstream = await startFakeUpstream();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-trace-'));
    const configPath = path.join(dir, 'svc.yaml');
    fs.writeFileSync(configPath, configYaml(upstream.baseUrl, await freePort()));
    // The suite's store (SQLite, or MySQL with SVC_TEST_DATABASE=mysql: then the mysql2 spans).
    database = await createTestDatabase();
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: database.url, SVC_CONFIG: configPath };
    const account = await svcJson(['account', 'create', '--name', 'trace test'], env);
    accountId = String(account['id']);
    const created = await svcJson(['key', 'create', '--account', accountId], env);
    key = String(created['key']);
    keyId = String(created['id']);
    assert.match(key, /^svc_sk_/);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '100000'], env);

    const httpPort = await freePort();
    httpUrl = `http://127.0.0.1:${httpPort}`;
    svc = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'svc-trace-test',
        // Export promptly instead of every 5 s; waits below are bounded by the test timeout.
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      'svc is ready',
    );
  });

  after(async () => {
    await svc?.stop();
    await upstream.close();
    await receiver.close();
    await database.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('links the HTTP server span, the gRPC client and server spans and a database span', async () => {
    const res = await fetch(`${httpUrl}/v1/openai/models`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { object: string };
    assert.equal(body.object, 'list');

    const all = await receiver.waitFor((spans) => findRequestTrace(spans) !== undefined);
    const trace = findRequestTrace(all);
    assert.ok(trace);
    assert.equal(trace.http.parentSpanId, '', 'the HTTP server span is the root of the request trace');
    assert.ok(descendsFrom(trace.spans, trace.grpcClient, trace.http));
    assert.equal(
      trace.grpcServer.parentSpanId,
      trace.grpcClient.spanId,
      'trace context crossed the gRPC hop in metadata',
    );
    assert.ok(descendsFrom(trace.spans, trace.db, trace.grpcServer));
    // SQLite spans come from the store itself; MySQL ones from the mysql2 instrumentation.
    assert.equal(trace.db.scope, database.dialect === 'mysql' ? '@opentelemetry/instrumentation-mysql2' : 'svc.store');
    assert.equal(trace.http.serviceName, 'svc-trace-test');
    assert.equal(trace.grpcServer.attributes['rpc.method'], 'ListModels');
    // The route table's template, from the gateway's mount and the adapter's router.
    assert.equal(trace.http.attributes['http.route'], '/v1/openai/models');
    assert.equal(trace.http.name, 'GET /v1/openai/models');
  });

  it('names the HTTP server span by the route template, never by the raw path', async () => {
    const res = await fetch(`${httpUrl}/v1/openai/responses/resp_not_there`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(res.status, 404);
    await res.arrayBuffer();
    const isThis = (s: ReceivedSpan): boolean =>
      s.scope === HTTP_SCOPE &&
      s.kind === SPAN_KIND.server &&
      String(s.attributes['url.path'] ?? s.attributes['http.target'] ?? '') === '/v1/openai/responses/resp_not_there';
    const spans = await receiver.waitFor((all) => all.some(isThis));
    const span = spans.find(isThis);
    assert.equal(span?.attributes['http.route'], '/v1/openai/responses/:id');
    assert.equal(span?.name, 'GET /v1/openai/responses/:id');
  });

  it("links an MCP request's span to the client's trace from _meta.traceparent", async () => {
    const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const clientSpan = '00f067aa0ba902b7';
    const res = await fetch(`${httpUrl}/v1/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: { _meta: { traceparent: `00-${clientTrace}-${clientSpan}-01` } },
      }),
    });
    assert.equal(res.status, 200, await res.text());
    const linked = (spans: readonly ReceivedSpan[]): ReceivedSpan | undefined =>
      spans.find(
        (s) =>
          s.scope === HTTP_SCOPE &&
          s.kind === SPAN_KIND.server &&
          (s.links ?? []).some((l) => l.traceId === clientTrace && l.spanId === clientSpan),
      );
    const all = await receiver.waitFor((spans) => linked(spans) !== undefined);
    const span = linked(all);
    assert.ok(span);
    assert.notEqual(span.traceId, clientTrace, "svc's own trace, joined to the client's by the link");
  });

  it('traces a chat completion down to the upstream call, with what it cost (SPEC §10)', async () => {
    // Cache parts and reasoning inside the 100 input and 50 output (the model has no cache prices:
    // the cost is that of 100 input tokens).
    upstream.enqueue({
      kind: 'text',
      text: 'traced',
      usage: {
        prompt_tokens: 100,
        completion_tokens: 50,
        cached_tokens: 40,
        cache_write_tokens: 10,
        reasoning_tokens: 7,
      },
    });
    const res = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'trace me' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const requestId = res.headers.get('x-request-id') ?? '';
    assert.notEqual(requestId, '');
    // The fake upstream reports 100 input and 50 output tokens.
    const cost = Math.max(1, Math.ceil((100 * INPUT_PER_1M + 50 * OUTPUT_PER_1M) / 1e6));

    const chatTrace = (spans: readonly ReceivedSpan[]): ReceivedSpan[] | undefined => {
      const http = spans.find(
        (s) =>
          s.scope === HTTP_SCOPE &&
          s.kind === SPAN_KIND.server &&
          String(s.attributes['url.path'] ?? '') === '/v1/openai/chat/completions',
      );
      if (http === undefined) return undefined;
      const inTrace = spans.filter((s) => s.traceId === http.traceId);
      const server = inTrace.find((s) => isGrpcServer(s) && s.attributes['rpc.method'] === 'CreateChatCompletion');
      const upstreamCall = inTrace.find(isUpstreamClient);
      const charged = inTrace.some((s) => s.attributes['svc.cost.credits'] !== undefined);
      return server !== undefined && upstreamCall !== undefined && charged ? inTrace : undefined;
    };
    const spans = chatTrace(await receiver.waitFor((all) => chatTrace(all) !== undefined)) ?? [];
    const server = spans.find((s) => isGrpcServer(s) && s.attributes['rpc.method'] === 'CreateChatCompletion');
    const upstreamCall = spans.find(isUpstreamClient);
    assert.ok(server !== undefined && upstreamCall !== undefined);
    assert.ok(descendsFrom(spans, upstreamCall, server), 'the upstream HTTP call is inside the gRPC server span');

    const attribute = (name: string): unknown => spans.find((s) => s.attributes[name] !== undefined)?.attributes[name];
    assert.equal(attribute('svc.account.id'), accountId);
    assert.equal(attribute('svc.key.id'), keyId);
    assert.equal(attribute('svc.cost.credits'), cost);
    assert.equal(attribute('svc.wallet.balance_after'), 100000 - cost);
    assert.equal(attribute('gen_ai.request.model'), 'svc-pro');
    assert.equal(attribute('gen_ai.usage.input_tokens'), 100);
    assert.equal(attribute('gen_ai.usage.output_tokens'), 50);
    // The GenAI conventions' newest names (SPEC §10): the cache parts, reasoning, the provider's
    // well-known name and the operation.
    assert.equal(attribute('gen_ai.usage.cache_read.input_tokens'), 40);
    assert.equal(attribute('gen_ai.usage.cache_creation.input_tokens'), 10);
    assert.equal(attribute('gen_ai.usage.reasoning.output_tokens'), 7);
    assert.equal(attribute('gen_ai.provider.name'), 'openai');
    assert.equal(attribute('gen_ai.operation.name'), 'chat');
    assert.ok(
      spans.some((s) => Object.values(s.attributes).includes(requestId)),
      `the request id ${requestId} is on a span of the trace`,
    );
    // Each upstream attempt is an event with the upstream's name (issue 15), never the key.
    const attempts = spans.flatMap((s) => s.events.filter((e) => e.name === 'svc.upstream.attempt'));
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]?.attributes['svc.upstream.name'], `svc-pro#1:openai@${new URL(upstream.baseUrl).host}`);
    assert.equal(attempts[0]?.attributes['svc.upstream.outcome'], 'ok');
    assert.equal(typeof attempts[0]?.attributes['svc.upstream.latency_ms'], 'number');
  });

  it('marks a usage svc counted itself, and a usage priced above its hold, on the span (issue 30)', async () => {
    const call = async (body: object): Promise<{ requestId: string; cost: string | null }> => {
      const res = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'edges' }], ...body }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return { requestId: res.headers.get('x-request-id') ?? '', cost: res.headers.get('x-svc-cost') };
    };
    // The spans of the trace that carries `requestId`, once it has been charged.
    const traceOf = (all: readonly ReceivedSpan[], requestId: string): ReceivedSpan[] | undefined => {
      const tagged = all.find((s) => Object.values(s.attributes).includes(requestId));
      if (tagged === undefined) return undefined;
      const inTrace = all.filter((s) => s.traceId === tagged.traceId);
      return inTrace.some((s) => s.attributes['svc.cost.credits'] !== undefined) ? inTrace : undefined;
    };

    upstream.enqueue({ kind: 'text', text: 'no usage here', usage: 'omit' });
    const estimated = await call({});
    const estimatedSpans =
      traceOf(await receiver.waitFor((all) => traceOf(all, estimated.requestId) !== undefined), estimated.requestId) ?? [];
    assert.ok(estimatedSpans.some((s) => s.attributes['svc.usage.estimated'] === true), 'svc.usage.estimated on the span');

    upstream.enqueue({ kind: 'text', text: 'long', usage: { prompt_tokens: 10, completion_tokens: 10_000_000 } });
    const over = await call({ max_tokens: 10 });
    const overSpans = traceOf(await receiver.waitFor((all) => traceOf(all, over.requestId) !== undefined), over.requestId) ?? [];
    assert.ok(overSpans.some((s) => s.attributes['svc.usage.over_hold'] === true), 'svc.usage.over_hold on the span');
    const event = overSpans.flatMap((s) => s.events).find((e) => e.name === 'svc.usage.over_hold');
    assert.ok(event !== undefined);
    const priced = Math.ceil((10 * INPUT_PER_1M + 10_000_000 * OUTPUT_PER_1M) / 1e6);
    assert.equal(event.attributes['svc.usage.cost'], priced);
    // Charged the hold, which the client is shown, and the span says.
    assert.equal(String(event.attributes['svc.hold.amount']), over.cost);
    assert.equal(
      String(overSpans.find((s) => s.attributes['svc.cost.credits'] !== undefined)?.attributes['svc.cost.credits']),
      over.cost,
    );
    assert.equal(estimatedSpans.some((s) => s.attributes['svc.usage.over_hold'] === true), false);
  });

  it("names an upstream failure's cause (refused, DNS, TLS) in the log line and the span, not to the client", async () => {
    const expected: Record<string, RegExp> = {
      'svc-refused': /^connect ECONNREFUSED$/,
      'svc-no-dns': /^dns (ENOTFOUND|EAI_AGAIN)$/,
      'svc-not-tls': /^tls (EPROTO|ERR_SSL_[A-Z_]+)$/,
    };
    for (const [model, cause] of Object.entries(expected)) {
      const res = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.ok(res.status >= 500, `${model}: ${res.status}`);
      const body = await res.text();
      assert.doesNotMatch(
        body,
        /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EPROTO|ERR_SSL|invalid|127\.0\.0\.1/,
        "the cause is not the client's",
      );
      const event = (all: readonly ReceivedSpan[]) =>
        all
          .flatMap((s) => s.events.filter((e) => e.name === 'svc.upstream.attempt'))
          .find((e) => String(e.attributes['svc.upstream.name']).startsWith(`${model}#1:`));
      const attempt = event(await receiver.waitFor((all) => event(all) !== undefined));
      assert.match(String(attempt?.attributes['svc.upstream.cause']), cause, model);
      // Log lines are written in batches (at least every 200 ms): wait for this one.
      const findLine = (): Record<string, unknown> | undefined =>
        (svc?.output() ?? '')
          .split('\n')
          .map((l) => (l.startsWith('{') ? (JSON.parse(l) as Record<string, unknown>) : {}))
          .find((l) => l['msg'] === 'upstream attempt failed' && l['model'] === model);
      for (let i = 0; i < 50 && findLine() === undefined; i += 1) await new Promise((r) => setTimeout(r, 100));
      const line = findLine();
      assert.match(String(line?.['cause']), cause, `${model}: ${JSON.stringify(line)}`);
    }
  });

  it('never puts the API key or the upstream secret in a span', async () => {
    // Both requests above have been exported; stopping flushes anything still buffered.
    await svc?.stop();
    svc = undefined;
    const dump = JSON.stringify(receiver.spans());
    assert.ok(receiver.spans().length > 0);
    assert.ok(!dump.includes(key.slice('svc_sk_'.length, 'svc_sk_'.length + 16)), 'the API key leaked into a span');
    assert.ok(!dump.includes('trace-upstream-secret'), 'the upstream API key leaked into a span');
    // SQL text is recorded with its values masked: prompts, hashes and ids stay out of traces.
    const statements = receiver
      .spans()
      .filter(isDb)
      .map((s) => JSON.stringify(s.attributes));
    assert.ok(statements.length > 0);
    assert.ok(
      statements.every((text) => !text.includes(keyId) && !text.includes(accountId)),
      'a SQL span carries a literal value',
    );
  });
});

describe('tracing across processes (svc gateway → svc core)', function () {
  // Two processes and two CLI runs from source: slow on a loaded 2-core machine.
  this.timeout(120_000);
  let receiver: OtlpReceiver;
  let database: TestDatabase;
  const procs: SvcProcess[] = [];

  before(async () => {
    receiver = await startOtlpReceiver();
    database = await createTestDatabase();
  });

  after(async () => {
    for (const p of procs.reverse()) await p.stop();
    await receiver.close();
    await database.drop();
  });

  it('continues the gateway trace in the core from the gRPC metadata alone', async () => {
    const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: database.url };
    const account = await svcJson(['account', 'create', '--name', 'split trace'], env);
    const key = String((await svcJson(['key', 'create', '--account', String(account['id'])], env))['key']);
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    const grpcAddr = `127.0.0.1:${await freePort()}`;
    procs.push(
      await spawnSvc(
        ['core'],
        { ...env, ...otel, SVC_GRPC_ADDR: grpcAddr, OTEL_SERVICE_NAME: 'svc-core' },
        'core listening (gRPC)',
      ),
    );
    const httpPort = await freePort();
    procs.push(
      await spawnSvc(
        ['gateway', '--core', grpcAddr],
        { ...env, ...otel, SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`, OTEL_SERVICE_NAME: 'svc-gateway' },
        'gateway listening (HTTP)',
      ),
    );

    const res = await fetch(`http://127.0.0.1:${httpPort}/v1/openai/models`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(res.status, 200, await res.clone().text());

    // A graceful stop flushes every buffered span, so after it the receiver has them all.
    for (const p of procs.splice(0).reverse()) assert.equal(await p.stop(), 0, p.output());
    const spans = receiver.spans();
    const trace = findRequestTrace(spans);
    assert.ok(
      trace,
      `no connected trace in ${JSON.stringify(spans.map((s) => [s.serviceName, s.name, s.spanId, s.parentSpanId]))}`,
    );
    assert.equal(trace.http.serviceName, 'svc-gateway');
    assert.equal(trace.grpcClient.serviceName, 'svc-gateway');
    assert.equal(trace.grpcServer.serviceName, 'svc-core');
    assert.equal(trace.db.serviceName, 'svc-core');
    assert.equal(trace.grpcServer.parentSpanId, trace.grpcClient.spanId);
  });
});
