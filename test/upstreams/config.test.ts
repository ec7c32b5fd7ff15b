import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { parseConfig } from '../../core/config/load';
import { startSvc } from '../helpers/harness';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';

const MODEL = `models:
  svc-pro:
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    aliases: [gpt-4o-mini]
    upstreams:
      - provider: openai
        base_url: https://a.example.com/v1
        api_key: \${A_KEY}
        upstream_model: m-a
        weight: 3
      - provider: openai
        base_url: https://b.example.com/v1
        upstream_model: m-b
        priority: 2
  svc-lite:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 1 }
`;

function rejects(text: string, message: string | RegExp): void {
  assert.throws(
    () => parseConfig(text, { A_KEY: 'secret-a-0123456789' }, 'test.yaml'),
    (error: unknown) => {
      assert.ok(error instanceof Error);
      if (typeof message === 'string') assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
  );
}

describe('upstreams configuration (SPEC §4)', () => {
  it('reads the list with its defaults and names every upstream stably', () => {
    const model = parseConfig(MODEL, { A_KEY: 'secret-a-0123456789' }, 'test.yaml').models.get('svc-pro');
    assert.deepEqual(
      model?.upstreams.map((u) => [u.name, u.priority, u.weight, u.upstreamModel]),
      [
        ['svc-pro#1:openai@a.example.com', 1, 3, 'm-a'],
        ['svc-pro#2:openai@b.example.com', 2, 1, 'm-b'],
      ],
    );
    assert.deepEqual(model?.breaker, { failures: 5, openS: 30 });
    assert.deepEqual(model?.aliases, ['gpt-4o-mini']);
  });

  it('refuses bad input at start, naming the key', () => {
    rejects(
      MODEL.replace(/upstreams:[\s\S]*?(?=\n {2}svc-lite)/, 'upstreams: []'),
      'config models.svc-pro.upstreams: must list at least one upstream',
    );
    rejects(
      MODEL.replace('weight: 3', 'weight: 0'),
      'config models.svc-pro.upstreams.0.weight: must be a positive number up to 1000000 (got 0)',
    );
    rejects(MODEL.replace('weight: 3', 'weight: -2'), /^config models\.svc-pro\.upstreams\.0\.weight: /);
    rejects(
      MODEL.replace('priority: 2', 'priority: 1.5'),
      'config models.svc-pro.upstreams.1.priority: must be a non-negative integer (got the fraction 1.5)',
    );
    rejects(MODEL.replace('priority: 2', 'priority: high'), /^config models\.svc-pro\.upstreams\.1\.priority: /);
    rejects(
      MODEL.replace('provider: openai\n        base_url: https://b', 'provider: bedrock\n        base_url: https://b'),
      'config models.svc-pro.upstreams.1.provider: unknown provider "bedrock" (expected one of: openai, openai-responses, anthropic, gemini, sandbox, cohere)',
    );
    rejects(
      MODEL.replace('aliases: [gpt-4o-mini]', 'aliases: [svc-lite]'),
      "config models.svc-pro.aliases.0: 'svc-lite' is already a model name (models.svc-lite)",
    );
    rejects(
      `${MODEL}    aliases: [gpt-4o-mini]\n`,
      "config models.svc-lite.aliases.0: 'gpt-4o-mini' is already a model name (models.svc-pro.aliases.0)",
    );
    rejects(
      MODEL.replace('    aliases:', '    provider: openai\n    aliases:'),
      'config models.svc-pro.provider: belongs inside each entry of upstreams when upstreams is given',
    );
    rejects(
      MODEL.replace('weight: 3', 'weight: 3\n        wieght: 2'),
      /^config models\.svc-pro\.upstreams\.0\.wieght: unknown key/,
    );
    rejects(
      MODEL.replace('weight: 3', 'weight: 3\n        headers: { Content-Length: "1" }'),
      'config models.svc-pro.upstreams.0.headers.Content-Length: is set by svc itself and cannot be configured',
    );
    rejects(
      MODEL.replace('weight: 3', 'weight: 3\n        max_concurrency: 0'),
      /^config models\.svc-pro\.upstreams\.0\.max_concurrency: must be a positive integer/,
    );
    rejects(
      MODEL.replace('upstream_model: m-b', 'upstream_model: m-b\n        max_tokens_field: max_toks'),
      /^config models\.svc-pro\.upstreams\.1\.max_tokens_field: unknown max_tokens_field/,
    );
    rejects(
      `${MODEL}    breaker: { failures: 0 }\n`,
      /^config models\.svc-lite\.breaker\.failures: must be a positive integer/,
    );
    rejects(
      MODEL.replace('upstream_model: m-a', 'upstream_model: m-a\n        priority: 1\n        priority: 2'),
      /invalid YAML|duplicate/i,
    );
  });

  describe('per-upstream options over HTTP', function () {
    let a: FakeUpstream;
    let b: FakeUpstream;
    before(async () => {
      [a, b] = await Promise.all([startFakeUpstream(), startFakeUpstream()]);
    });
    after(async () => {
      await Promise.all([a.close(), b.close()]);
    });

    it('headers and max_tokens_field go to their upstream; a full upstream is skipped; all full is a clean 503', async () => {
      const config = `models:
  svc-pro:
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    upstreams:
      - provider: openai
        base_url: ${a.baseUrl}
        upstream_model: m-a
        max_tokens_field: max_completion_tokens
        max_concurrency: 1
        headers:
          X-Tenant: \${TENANT}
      - provider: openai
        base_url: ${b.baseUrl}
        upstream_model: m-b
        max_concurrency: 1
        priority: 2
`;
      const svc = await startSvc({ config, env: { TENANT: 'tenant-42' } });
      try {
        const { key, accountId } = await svc.createFundedKey(100_000);
        const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
        await client.chat.completions.create({
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'x' }],
          // Limits whose holds cover the fake's usage (100 in, 50 out): never charged above the hold.
          max_tokens: 700,
        });
        const sent = a.requests[0];
        assert.equal(sent?.headers['x-tenant'], 'tenant-42');
        assert.deepEqual(
          [sent?.body['max_completion_tokens'], sent?.body['max_tokens'], sent?.body['model']],
          [700, undefined, 'm-a'],
        );

        // a and b each hold one call: the third finds both full.
        const releaseA = a.pause();
        const releaseB = b.pause();
        const openA = a.nextRequestOpen();
        const first = client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: '1' }] });
        await openA;
        const openB = b.nextRequestOpen();
        const second = client.chat.completions.create({
          model: 'svc-pro',
          messages: [{ role: 'user', content: '2' }],
          max_tokens: 500,
        });
        await openB;
        assert.equal(b.requests[0]?.body['max_tokens'], 500, 'b keeps the field the client used');
        await assert.rejects(
          client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: '3' }] }),
          (error: unknown) => error instanceof OpenAI.APIError && error.status === 503,
        );
        releaseA();
        releaseB();
        await Promise.all([first, second]);
        const w = await svc.wallet(accountId);
        assert.equal(w.held, 0n);
        assert.equal(w.balance, 100_000n - 3n * 45n, 'three answered calls charged, the refused one free');
      } finally {
        await svc.close();
      }
    });
  });
});
