import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const FIXTURE = path.join(__dirname, 'fixtures', 'loaded.ts');

// Each case in a process of its own: the module cache is what is measured.
async function loadedWith(env: Record<string, string>): Promise<string[]> {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OTEL_')) base[k] = v;
  const { stdout } = await exec(process.execPath, ['--require', 'tsx/cjs', FIXTURE], {
    env: { ...base, ...env },
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as string[];
}

// `svc serve` with nothing configured loads ~1,100 modules instead of ~3,000 (docs/performance.md,
// Memory): the OpenTelemetry SDKs, exporters and instrumentations, mysql2 and ioredis are required
// only when the environment asks for them; the MCP client and gRPC reflection on their first call.
describe('optional packages load only when configured', function () {
  this.timeout(120_000);

  it('with tracing and OTLP metrics off and a SQLite store, none of them is loaded', async () => {
    assert.deepEqual(await loadedWith({}), []);
  });

  it('an OTLP endpoint loads the tracing and metrics SDKs (and still neither mysql2 nor ioredis)', async () => {
    const loaded = await loadedWith({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    for (const name of [
      '@opentelemetry/sdk-node',
      '@opentelemetry/sdk-trace-base',
      '@opentelemetry/sdk-metrics',
      '@opentelemetry/exporter-trace-otlp-proto',
      '@opentelemetry/exporter-metrics-otlp-proto',
      '@opentelemetry/instrumentation-http',
    ])
      assert.ok(loaded.includes(name), `${name} not loaded: ${JSON.stringify(loaded)}`);
    assert.ok(!loaded.includes('mysql2') && !loaded.includes('ioredis'), JSON.stringify(loaded));
  });

  it('`svc gateway` loads the edge only (no store, tokenizer or core services), `svc core` no HTTP adapters', async () => {
    assert.deepEqual(await loadedWith({ LOADED_PART: 'gateway' }), []);
    assert.deepEqual(await loadedWith({ LOADED_PART: 'core' }), []);
  });
});
