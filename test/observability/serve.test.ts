import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { runSvc, svcJson } from '../cli/run-svc';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { connectClient } from '../mcp/helpers';
import { parsePrometheusText, type Sample } from './prometheus';

const HTTP_SCOPE = '@opentelemetry/instrumentation-http';
// gRPC spans come from the gRPC instrumentation, or (svc serve's adapters calling its core in
// process) from the in-process channel, with the same names and rpc.* attributes.
const GRPC_SCOPES = new Set(['@opentelemetry/instrumentation-grpc', 'svc-in-process']);
const INPUT_PER_1M = 150_000;
const OUTPUT_PER_1M = 600_000;
const TOPUP = 1_000_000;
// The public port's GET /metrics answers the operator only (Prometheus: `authorization: { credentials: … }`).
const ADMIN_TOKEN = 'observability-admin-token-0123456789';
const scraper = { authorization: `Bearer ${ADMIN_TOKEN}` };

const isGrpc = (kind: number) => (s: ReceivedSpan) => GRPC_SCOPES.has(s.scope) && s.kind === kind;
const isDb = (s: ReceivedSpan): boolean =>
  typeof s.attributes['db.system'] === 'string' || typeof s.attributes['db.system.name'] === 'string';
const urlOf = (s: ReceivedSpan): string => String(s.attributes['url.full'] ?? s.attributes['http.url'] ?? '');

function descendsFrom(spans: readonly ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  for (let at: ReceivedSpan | undefined = span; at !== undefined; at = byId.get(at.parentSpanId)) {
    if (at.spanId === ancestor.spanId) return true;
  }
  return false;
}

interface LedgerEntry {
  kind: string;
  amount: number;
  balance_after: number;
  request_id: string;
}

interface LogLine {
  msg?: string;
  requestId?: string;
  traceId?: string;
  accountId?: string;
  keyId?: string;
  route?: string;
  status?: number;
  cost?: number;
  latencyMs?: number;
}

/** The trace of one request: found by the request id on its spans, checked to be a single trace. */
function traceOf(all: readonly ReceivedSpan[], requestId: string, rpcMethod: string): ReceivedSpan[] | undefined {
  const tagged = all.filter((s) => s.attributes['svc.request.id'] === requestId);
  const server = tagged.find((s) => isGrpc(SPAN_KIND.server)(s) && s.attributes['rpc.method'] === rpcMethod);
  if (server === undefined || server.attributes['svc.cost.credits'] === undefined) return undefined;
  const spans = all.filter((s) => s.traceId === server.traceId);
  // Complete once the HTTP server span (the root, ended last) has arrived.
  return spans.some((s) => s.parentSpanId === '' && s.scope === HTTP_SCOPE) ? spans : undefined;
}

describe('observability through svc serve: one trace, metrics, one log line and usage per request', function () {
  this.timeout(120_000);
  let receiver: OtlpReceiver;
  let upstream: FakeUpstream;
  let tools: FakeToolProviders;
  let database: TestDatabase;
  let svc: SvcProcess | undefined;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let httpUrl: string;
  let key: string;
  let accountId: string;
  let keyId: string;
  const requestIds: string[] = [];

  const ledger = async (): Promise<LedgerEntry[]> =>
    (await svcJson(['wallet', 'ledger', '--account', accountId, '--limit', '1000'], env))['entries'] as LedgerEntry[];

  before(async function () {
    receiver = await startOtlpReceiver();
    upstream = await startFakeUpstream();
    tools = await startFakeToolProviders();
    database = await createTestDatabase();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-obs-'));
    const configPath = path.join(dir, 'svc.yaml');
    fs.writeFileSync(
      configPath,
      `models:
  svc-pro:
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: obs-upstream-secret
    upstream_model: fake-model-1
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 128000
    max_output_tokens: 1000
tools:
  web_search:
    provider: perplexity
    base_url: ${tools.baseUrl('perplexity')}
    api_key: pplx-test-key
    model: sonar
    price: { input_per_1m: 100000, output_per_1m: 100000, cap: 1000 }
  maps_search_places:
    provider: neshan
    base_url: ${tools.baseUrl('neshan')}
    api_key: neshan-test-key
    price: 460
  shopping_search:
    provider: torob
    base_url: ${tools.baseUrl('torob')}
    price: 230
`,
    );
    env = { SVC_DATABASE_URL: database.url, SVC_CONFIG: configPath };
    accountId = String((await svcJson(['account', 'create', '--name', 'observability'], env))['id']);
    const created = await svcJson(['key', 'create', '--account', accountId], env);
    key = String(created['key']);
    keyId = String(created['id']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', String(TOPUP)], env);

    const httpPort = await freePort();
    httpUrl = `http://127.0.0.1:${httpPort}`;
    svc = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_ADMIN_TOKEN: ADMIN_TOKEN,
        // The standard default protocol (http/protobuf), as a collector, Jaeger or Tempo take it.
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'svc-observability-test',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      'svc is ready',
    );
  });

  after(async () => {
    await svc?.stop();
    await upstream?.close();
    await tools?.close();
    await receiver?.close();
    await database?.drop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a streamed chat completion (openai client) is one trace, HTTP → gRPC → DB and upstream, carrying its cost', async () => {
    const openai = new OpenAI({ baseURL: `${httpUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    const { data: stream, response } = await openai.chat.completions
      .create({
        model: 'svc-pro',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'trace this stream' }],
      })
      .withResponse();
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    assert.equal(usage?.prompt_tokens, 100);
    const requestId = response.headers.get('x-request-id') ?? '';
    assert.match(requestId, /^req_/);
    requestIds.push(requestId);

    const spans =
      traceOf(
        await receiver.waitFor((all) => traceOf(all, requestId, 'StreamChatCompletion') !== undefined),
        requestId,
        'StreamChatCompletion',
      ) ?? [];
    const roots = spans.filter((s) => s.parentSpanId === '');
    assert.equal(roots.length, 1, 'one root: the HTTP server span');
    const http = roots[0] as ReceivedSpan;
    assert.equal(http.scope, HTTP_SCOPE);
    assert.equal(http.kind, SPAN_KIND.server);
    assert.equal(http.attributes['url.path'], '/v1/openai/chat/completions');
    assert.equal(http.attributes['svc.request.id'], requestId, 'the request id on the root span');
    const client = spans.find(
      (s) => isGrpc(SPAN_KIND.client)(s) && String(s.attributes['rpc.method']) === 'StreamChatCompletion',
    );
    const server = spans.find(
      (s) => isGrpc(SPAN_KIND.server)(s) && s.attributes['rpc.method'] === 'StreamChatCompletion',
    );
    assert.ok(client && server);
    assert.ok(descendsFrom(spans, client, http));
    assert.equal(server.parentSpanId, client.spanId, 'the trace crossed the gRPC hop');
    assert.ok(
      spans.some((s) => isDb(s) && descendsFrom(spans, s, server)),
      'database spans under the gRPC server span',
    );
    const up = spans.find(
      (s) => s.kind === SPAN_KIND.client && !GRPC_SCOPES.has(s.scope) && urlOf(s).includes('/chat/completions'),
    );
    assert.ok(up && descendsFrom(spans, up, server), 'the upstream HTTP call under the gRPC server span');
    // No other trace carries this request id.
    assert.deepEqual(
      new Set(
        receiver
          .spans()
          .filter((s) => s.attributes['svc.request.id'] === requestId)
          .map((s) => s.traceId),
      ),
      new Set([http.traceId]),
    );

    const charge = (await ledger()).find((e) => e.kind === 'charge' && e.request_id === requestId);
    assert.ok(charge, 'a ledger charge for the request id');
    const cost = Math.max(1, Math.ceil((100 * INPUT_PER_1M + 50 * OUTPUT_PER_1M) / 1e6));
    assert.equal(-charge.amount, cost);
    // SPEC §10 on the server-streaming call's own span, where the settle happened.
    const a = server.attributes;
    assert.equal(a['svc.request.id'], requestId);
    assert.equal(a['svc.account.id'], accountId);
    assert.equal(a['svc.key.id'], keyId);
    assert.equal(a['svc.cost.credits'], -charge.amount, 'the span cost equals the ledger entry');
    assert.equal(a['svc.wallet.balance_after'], charge.balance_after);
    assert.equal(a['gen_ai.request.model'], 'svc-pro');
    assert.equal(a['gen_ai.usage.input_tokens'], 100);
    assert.equal(a['gen_ai.usage.output_tokens'], 50);
    const events = server.events.map((e) => e.name);
    assert.ok(
      events.indexOf('svc.wallet.hold') >= 0 && events.indexOf('svc.wallet.settle') > events.indexOf('svc.wallet.hold'),
      `hold then settle: ${events.join(', ')}`,
    );
    assert.equal(server.events.find((e) => e.name === 'svc.wallet.settle')?.attributes['svc.cost.credits'], cost);
  });

  it('a tool call (MCP client) is one trace with the tool, the provider call and its cost', async () => {
    const mcp = await connectClient(httpUrl, key);
    let requestId: string;
    try {
      const result = await mcp.callTool({ name: 'web_search', arguments: { query: 'tehran weather' } });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      requestId = String((result._meta ?? {})['svc/request_id']);
    } finally {
      await mcp.close();
    }
    assert.match(requestId, /^req_/);
    requestIds.push(requestId);

    const spans =
      traceOf(
        await receiver.waitFor((all) => traceOf(all, requestId, 'CallTool') !== undefined),
        requestId,
        'CallTool',
      ) ?? [];
    const roots = spans.filter((s) => s.parentSpanId === '');
    assert.equal(roots.length, 1);
    const http = roots[0] as ReceivedSpan;
    assert.equal(http.attributes['url.path'], '/v1/mcp');
    assert.equal(http.attributes['svc.request.id'], requestId);
    const client = spans.find(isGrpc(SPAN_KIND.client));
    const server = spans.find((s) => isGrpc(SPAN_KIND.server)(s) && s.attributes['rpc.method'] === 'CallTool');
    assert.ok(client && server && descendsFrom(spans, client, http));
    assert.equal(server.parentSpanId, client.spanId);
    assert.ok(spans.some((s) => isDb(s) && descendsFrom(spans, s, server)));
    const up = spans.find(
      (s) => s.kind === SPAN_KIND.client && !GRPC_SCOPES.has(s.scope) && urlOf(s).includes('/perplexity'),
    );
    assert.ok(up && descendsFrom(spans, up, server), 'the provider call under the gRPC server span');

    const charge = (await ledger()).find((e) => e.kind === 'charge' && e.request_id === requestId);
    assert.ok(charge);
    const a = server.attributes;
    assert.equal(a['svc.tool.name'], 'web_search');
    assert.equal(a['svc.account.id'], accountId);
    assert.equal(a['svc.key.id'], keyId);
    assert.equal(a['svc.cost.credits'], -charge.amount);
    assert.equal(a['svc.wallet.balance_after'], charge.balance_after);
    const events = server.events.map((e) => e.name);
    assert.ok(events.includes('svc.wallet.hold') && events.includes('svc.wallet.settle'), events.join(', '));
  });

  it('a failed upstream call marks its spans as errors and charges nothing', async () => {
    upstream.enqueue({ kind: 'http_error', status: 500 });
    const res = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'fail' }] }),
    });
    assert.ok(res.status >= 500, String(res.status));
    const requestId = res.headers.get('x-request-id') ?? '';
    requestIds.push(requestId);
    const failed = (all: ReceivedSpan[]): ReceivedSpan[] => {
      const server = all.find((s) => s.attributes['svc.request.id'] === requestId && isGrpc(SPAN_KIND.server)(s));
      if (server === undefined) return [];
      const spans = all.filter((s) => s.traceId === server.traceId);
      return spans.some((s) => s.parentSpanId === '') ? spans : [];
    };
    const spans = failed(await receiver.waitFor((all) => failed(all).length > 0));
    const server = spans.find((s) => isGrpc(SPAN_KIND.server)(s));
    const http = spans.find((s) => s.parentSpanId === '');
    assert.equal(server?.statusCode, 2, 'gRPC server span status ERROR');
    assert.equal(http?.statusCode, 2, 'HTTP server span status ERROR');
    assert.ok(!(await ledger()).some((e) => e.request_id === requestId && e.kind === 'charge'));
  });

  it('GET /metrics is valid Prometheus text whose credits counter equals the ledger charges', async () => {
    const res = await fetch(`${httpUrl}/metrics`, { headers: scraper });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const families = parsePrometheusText(await res.text());
    const sum = (name: string, where: (s: Sample) => boolean = () => true): number =>
      [...families.values()]
        .flatMap((f) => f.samples)
        .filter((s) => s.name === name && where(s))
        .reduce((x, s) => x + s.value, 0);

    const charged = (await ledger()).filter((e) => e.kind === 'charge').reduce((x, e) => x - e.amount, 0);
    assert.ok(charged > 0);
    assert.equal(families.get('svc_credits_charged_total')?.type, 'counter');
    assert.equal(sum('svc_credits_charged_total'), charged, 'credits counter = sum of ledger charges');
    assert.equal(
      sum('svc_credits_charged_total', (s) => s.labels['model'] === 'svc-pro') +
        sum('svc_credits_charged_total', (s) => s.labels['tool'] === 'web_search'),
      charged,
    );

    assert.equal(
      sum('svc_requests_total', (s) => s.labels['model'] === 'svc-pro' && s.labels['status'] === 'ok'),
      1,
    );
    assert.equal(
      sum('svc_requests_total', (s) => s.labels['model'] === 'svc-pro' && s.labels['status'] === 'error'),
      1,
    );
    assert.equal(
      sum('svc_requests_total', (s) => s.labels['tool'] === 'web_search' && s.labels['status'] === 'ok'),
      1,
    );
    assert.equal(
      sum('svc_tokens_total', (s) => s.labels['model'] === 'svc-pro' && s.labels['type'] === 'input'),
      100,
    );
    assert.equal(
      sum('svc_tokens_total', (s) => s.labels['model'] === 'svc-pro' && s.labels['type'] === 'output'),
      50,
    );
    assert.equal(sum('svc_wallet_holds_outstanding'), 0);
    assert.equal(
      sum(
        'svc_upstream_errors_total',
        (s) => s.labels['provider'] === 'openai' && s.labels['code'] === 'upstream_error',
      ),
      1,
    );
    // Upstream latency by provider, from the HTTP exchanges themselves: two to the model, one to perplexity.
    assert.equal(
      sum('svc_upstream_request_duration_seconds_count', (s) => s.labels['provider'] === 'openai'),
      2,
    );
    assert.equal(
      sum(
        'svc_upstream_request_duration_seconds_count',
        (s) => s.labels['provider'] === 'openai' && s.labels['status'] === '500',
      ),
      1,
    );
    assert.equal(
      sum('svc_upstream_request_duration_seconds_count', (s) => s.labels['provider'] === 'perplexity'),
      1,
    );
    // The gateway's own requests by route and status.
    assert.equal(
      sum(
        'svc_http_requests_total',
        (s) => s.labels['route'] === '/v1/openai/chat/completions' && s.labels['status'] === '200',
      ),
      1,
    );
    assert.ok(sum('svc_http_requests_total', (s) => s.labels['route'] === '/v1/mcp') >= 1);
    assert.ok(
      sum('svc_http_request_duration_seconds_count', (s) => s.labels['route'] === '/v1/openai/chat/completions') >= 2,
    );
    assert.ok(
      sum(
        'svc_core_calls_total',
        (s) => s.labels['method'] === '/svc.core.v1.ChatService/StreamChatCompletion' && s.labels['code'] === 'ok',
      ) >= 1,
    );
  });

  it('writes one log line per request with its request id, trace id, account, key, route, status, cost and latency', async () => {
    // svc serve's adapters call its core in process by default (SVC_SERVE_TRANSPORT).
    assert.match((svc as SvcProcess).output(), /"transport":"in-process".*"msg":"svc is ready"/);
    const read = (): LogLine[] =>
      (svc as SvcProcess)
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as LogLine)
        .filter((l) => l.msg === 'request');
    // Log lines leave in batches (at least every 200 ms): wait until every request's is out.
    let lines = read();
    for (let i = 0; i < 250 && !requestIds.every((id) => lines.some((l) => l.requestId === id)); i += 1) {
      await new Promise((r) => setTimeout(r, 20));
      lines = read();
    }
    const charges = new Map((await ledger()).filter((e) => e.kind === 'charge').map((e) => [e.request_id, -e.amount]));
    for (const requestId of requestIds) {
      const mine = lines.filter((l) => l.requestId === requestId);
      assert.equal(mine.length, 1, `one line for ${requestId}`);
      const line = mine[0] as LogLine;
      assert.equal(line.accountId, accountId, JSON.stringify(line));
      assert.equal(line.keyId, keyId);
      assert.match(line.traceId ?? '', /^[0-9a-f]{32}$/);
      const traceIds = new Set(
        receiver
          .spans()
          .filter((s) => s.attributes['svc.request.id'] === requestId)
          .map((s) => s.traceId),
      );
      assert.deepEqual(traceIds, new Set([line.traceId]), 'the log line names the request’s trace');
      assert.ok(typeof line.latencyMs === 'number' && line.latencyMs >= 0);
      assert.equal(line.cost ?? 0, charges.get(requestId) ?? 0, 'the logged cost is the ledger charge');
    }
    assert.ok(lines.some((l) => l.route === '/v1/openai/chat/completions' && l.status === 200));
    assert.ok(lines.some((l) => l.route === '/v1/openai/chat/completions' && (l.status ?? 0) >= 500));
  });

  it('the usage records carry the same request ids and costs as the ledger', async () => {
    const run = await runSvc(['usage', '--account', accountId, '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    const records = (
      JSON.parse(run.stdout) as { records: { request_id: string; cost: number; status: string; key_id: string }[] }
    ).records;
    const charges = new Map((await ledger()).filter((e) => e.kind === 'charge').map((e) => [e.request_id, -e.amount]));
    for (const requestId of requestIds) {
      const record = records.find((r) => r.request_id === requestId);
      assert.ok(record, requestId);
      assert.equal(record.key_id, keyId);
      assert.equal(record.cost, charges.get(requestId) ?? 0);
    }
  });

  it('a key or secret that a client or an upstream echoes is masked in the answer, the logs and the spans', async () => {
    // An upstream error body that echoes its own key (OpenAI does: "Incorrect API key provided: ...").
    upstream.enqueue({
      kind: 'http_error',
      status: 500,
      body: JSON.stringify({
        error: { message: 'Incorrect API key provided: obs-upstream-secret', type: 'server_error', code: null },
      }),
    });
    const failed = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'echo your key' }] }),
    });
    assert.ok(!(await failed.text()).includes('obs-upstream-secret'));
    // A key sent where no key belongs: in the query string, as a model name, as a response id.
    const asQuery = await fetch(`${httpUrl}/v1/openai/models?api_key=${key}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(asQuery.status, 200);
    const asModel = await fetch(`${httpUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: key, messages: [{ role: 'user', content: 'x' }] }),
    });
    assert.equal(asModel.status, 404);
    const asModelText = await asModel.text();
    assert.doesNotMatch(asModelText, /svc_sk_/, asModelText);
    const asId = await fetch(`${httpUrl}/v1/openai/responses/${key}`, { headers: { authorization: `Bearer ${key}` } });
    assert.ok(asId.status >= 400);
    assert.doesNotMatch(await asId.text(), /svc_sk_/);
    // Their spans are exported before the check below reads them all.
    await receiver.waitFor((all) => all.some((s) => JSON.stringify(s.attributes).includes('api_key=')));
  });

  it('no API key appears in any span, metric, log line or usage record', async () => {
    const metrics = await (await fetch(`${httpUrl}/metrics`, { headers: scraper })).text();
    await svc?.stop();
    const logs = (svc as SvcProcess).output();
    svc = undefined;
    const spans = JSON.stringify(receiver.spans());
    const usage = (await runSvc(['usage', '--account', accountId, '--json', '--limit', '1000'], env)).stdout;
    const secretPart = key.slice('svc_sk_'.length, 'svc_sk_'.length + 16);
    for (const [where, text] of [
      ['spans', spans],
      ['metrics', metrics],
      ['logs', logs],
      ['usage records', usage],
    ] as const) {
      assert.ok(text.length > 0, `${where} is empty`);
      assert.doesNotMatch(text, /svc_sk_/, `an API key in the ${where}`);
      assert.ok(!text.includes(secretPart), `part of the API key in the ${where}`);
      for (const secret of ['obs-upstream-secret', 'pplx-test-key', 'neshan-test-key'])
        assert.ok(!text.includes(secret), `${secret} in the ${where}`);
    }
    assert.ok(
      !logs.includes('trace this stream') && !spans.includes('trace this stream'),
      'a prompt in the logs or spans',
    );
  });
});
