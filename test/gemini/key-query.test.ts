import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { svcJson } from '../cli/run-svc';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';

/*
 * A Gemini key sent as `?key=` (SPEC §7c) reaches no log line, exported span or error message:
 * `svc serve` with tracing on, every kind of call made with the key in the query (answered,
 * streamed, refused), then its whole output and every span grepped for the key.
 */
describe('Gemini API: a key sent as ?key= is in no log, span or error', function () {
  this.timeout(120_000);
  let receiver: OtlpReceiver;
  let upstream: FakeUpstream;
  let database: TestDatabase;
  let svc: SvcProcess | undefined;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let httpUrl: string;
  let key: string;

  before(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startFakeUpstream();
    database = await createTestDatabase();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-gemini-key-'));
    const configPath = path.join(dir, 'svc.yaml');
    fs.writeFileSync(
      configPath,
      `models:
  svc-pro:
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: gemini-key-test-upstream-secret
    upstream_model: fake-model-1
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    max_output_tokens: 1000
`,
    );
    env = { SVC_DATABASE_URL: database.url, SVC_CONFIG: configPath };
    const accountId = String((await svcJson(['account', 'create', '--name', 'gemini-key'], env))['id']);
    key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
    await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '1000000'], env);
    const httpPort = await freePort();
    httpUrl = `http://127.0.0.1:${httpPort}`;
    svc = await spawnSvc(
      ['serve'],
      {
        ...env,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_LOG_LEVEL: 'debug',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'svc-gemini-key-test',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      'svc is ready',
    );
  });

  after(async () => {
    await svc?.stop();
    await upstream?.close();
    await receiver?.close();
    await database?.drop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers, streams and refusals with ?key= leave no trace of the key', async () => {
    const wrongKey = 'svc_sk_wrongwrongwrongwrongwrong0123';
    const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hello' }] }] });
    const post = (url: string, text = body): Promise<Response> =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
    const base = `${httpUrl}/v1/gemini/v1beta`;
    const texts: string[] = [];

    const ok = await post(`${base}/models/svc-pro:generateContent?key=${key}`);
    assert.equal(ok.status, 200);
    texts.push(await ok.text());
    const streamed = await post(`${base}/models/svc-pro:streamGenerateContent?alt=sse&key=${key}`);
    assert.equal(streamed.status, 200);
    texts.push(await streamed.text());
    upstream.enqueue({ kind: 'http_error', status: 500 });
    const failed = await post(`${base}/models/svc-pro:generateContent?key=${key}`);
    assert.equal(failed.status, 500);
    const refusals = [
      await post(`${base}/models/svc-pro:generateContent?key=${wrongKey}`),
      await post(`${base}/models/${key}:generateContent?key=${key}`),
      await post(`${base}/models/svc-pro:generateContent?key=${key}`, '{"contents": [}'),
      await post(`${base}/models/svc-pro:generateContent?key=${key}`, JSON.stringify({ contents: [], [key]: 1 })),
      await fetch(`${base}/models/${key}?key=${key}`),
      await fetch(`${base}/nothing/${key}?key=${key}`),
    ];
    assert.deepEqual(
      refusals.map((r) => r.status),
      [400, 404, 400, 400, 404, 404],
    );
    texts.push(await failed.text(), ...(await Promise.all(refusals.map((r) => r.text()))));
    for (const text of texts) {
      assert.ok(!text.includes(key), `the key in an answer: ${text}`);
      assert.ok(!text.includes(wrongKey), `the wrong key in an answer: ${text}`);
    }

    // Every request's HTTP server span is exported (its URL carried the key) before the grep.
    await receiver.waitFor(
      (all) =>
        all.filter((s) => String(s.attributes['url.query'] ?? s.attributes['http.target'] ?? '').includes('key='))
          .length >= 9,
    );
    await svc?.stop();
    const logs = (svc as SvcProcess).output();
    svc = undefined;
    const spans = JSON.stringify(receiver.spans());
    assert.match(logs, /gemini/, 'the request lines are in the log');
    const secret = key.slice('svc_sk_'.length);
    for (const [where, text] of [
      ['logs', logs],
      ['spans', spans],
    ] as const) {
      assert.ok(!text.includes(secret.slice(0, 12)), `part of the key in the ${where}`);
      assert.ok(!text.includes(wrongKey.slice('svc_sk_'.length, 20)), `part of the wrong key in the ${where}`);
      assert.ok(!text.includes('gemini-key-test-upstream-secret'), `the upstream secret in the ${where}`);
    }
  });
});
