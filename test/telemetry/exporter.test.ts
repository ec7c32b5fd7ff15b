import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';

const FIXTURE = path.join(__dirname, 'fixtures', 'emit.ts');

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

// Telemetry is process-wide (it patches modules), so each case runs in its own process.
function runFixture(env: Record<string, string>): Promise<ChildResult> {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OTEL_')) base[k] = v;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', FIXTURE], {
      env: { ...base, OTEL_BSP_SCHEDULE_DELAY: '50', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function byName(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const span = spans.find((s) => s.name === name);
  assert.ok(span, `no span named ${name} in ${JSON.stringify(spans.map((s) => s.name))}`);
  return span;
}

describe('telemetry export (OTLP/HTTP)', function () {
  let receiver: OtlpReceiver;
  beforeEach(async () => {
    receiver = await startOtlpReceiver();
  });
  afterEach(async () => {
    await receiver.close();
  });

  for (const protocol of ['http/json', 'http/protobuf'] as const) {
    it(`exports one connected trace over ${protocol}`, async () => {
      const result = await runFixture({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      });
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout), { enabled: true });
      const spans = receiver.spans();
      assert.deepEqual(
        [...new Set(receiver.contentTypes())],
        [protocol === 'http/json' ? 'application/json' : 'application/x-protobuf'],
      );
      const root = byName(spans, 'fixture.root');
      assert.equal(root.parentSpanId, '');
      assert.equal(root.serviceName, 'svc-telemetry-fixture');
      assert.ok(
        spans.every((s) => s.traceId === root.traceId),
        'all spans share the root trace',
      );

      const clients = spans.filter((s) => s.kind === SPAN_KIND.client);
      const servers = spans.filter((s) => s.kind === SPAN_KIND.server);
      assert.equal(clients.length, 2, 'one client span from node:http and one from fetch (undici)');
      assert.equal(servers.length, 2);
      for (const client of clients) {
        assert.equal(client.parentSpanId, root.spanId);
        // W3C trace context crossed the wire: the server span is the client span's child.
        assert.equal(servers.filter((s) => s.parentSpanId === client.spanId).length, 1);
      }
    });
  }

  it('honours OTEL_SERVICE_NAME and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', async () => {
    const result = await runFixture({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'renamed',
    });
    assert.equal(result.code, 0, result.stderr);
    assert.ok(receiver.spans().length > 0);
    assert.ok(receiver.spans().every((s) => s.serviceName === 'renamed'));
  });

  it('records nothing when the sampler says always_off', async () => {
    const result = await runFixture({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_off' });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(JSON.parse(result.stdout), { enabled: true });
    assert.deepEqual(receiver.spans(), []);
  });

  it('exports nothing and installs nothing without an endpoint', async () => {
    const result = await runFixture({});
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(JSON.parse(result.stdout), { enabled: false });
  });

  it('is off when OTEL_SDK_DISABLED=true even with an endpoint', async () => {
    const result = await runFixture({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(JSON.parse(result.stdout), { enabled: false });
    assert.deepEqual(receiver.spans(), []);
  });

  for (const [name, value] of [
    ['OTEL_TRACES_SAMPLER', 'sometimes'],
    ['OTEL_TRACES_SAMPLER_ARG', '2'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url'],
  ] as const) {
    it(`refuses to start with a bad ${name} and names it`, async () => {
      const env: Record<string, string> = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, [name]: value };
      if (name === 'OTEL_TRACES_SAMPLER_ARG') env['OTEL_TRACES_SAMPLER'] = 'traceidratio';
      const result = await runFixture(env);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, new RegExp(name));
    });
  }
});
