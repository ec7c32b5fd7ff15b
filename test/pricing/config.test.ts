import assert from 'node:assert/strict';
import { parseConfig } from '../../core/config/load';
import { creditsFromUsd, Decimal } from '../../core/config/decimal';
import { dollarPrice } from '../../core/config/tariff';

const MODEL = `
  svc-pro:
    provider: openai
    base_url: https://api.example.com/v1
    upstream_model: some-model
`;

function parse(text: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(text, env, 'test.yaml');
}

function rejects(text: string, message: string | RegExp): void {
  assert.throws(
    () => parse(text),
    (error: unknown) => {
      assert.ok(error instanceof Error);
      if (typeof message === 'string') assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
  );
}

const dec = (text: string): Decimal => Decimal.parse(text) ?? assert.fail(text);

describe('prices from the dollar: the configuration (SPEC §15)', () => {
  it('computes ceil(usd × rate × (1 + margin)) exactly: 0.55 × 98000 × 1.2 is 64680, not 64681', () => {
    assert.equal(0.55 * 98000 * 1.2, 64680.00000000001, 'floating point would round this up');
    assert.equal(creditsFromUsd(dec('0.55'), 98000n, dec('0.2')), 64680n);
    assert.equal(creditsFromUsd(dec('0.125'), 98000n, dec('0.3')), 15925n);
    assert.equal(creditsFromUsd(dec('0.0000001'), 1n, Decimal.ZERO), 1n, 'a fraction of a credit rounds up');
    assert.equal(creditsFromUsd(dec('1.5e-1'), 100n, dec('0')), 15n);
    assert.equal(Decimal.parse('1_0'), undefined);
    assert.equal(Decimal.parse('.inf'), undefined);
    assert.equal(dec('-0.50').toString(), '-0.5');
  });

  it('reads price_usd and margins from the text of the file, never through a float', () => {
    const config = parse(`
pricing:
  rate: 98000
  margin: 0.20
models:${MODEL}    price_usd: { input_per_1m: 0.55, cached_input_per_1m: 0.125, output_per_1m: 10, cache_write_per_1m: 0.6875, cache_write_1h_per_1m: 1.1 }
`);
    const model = config.models.get('svc-pro');
    assert.deepEqual(model?.price, {
      inputPer1m: 64680n,
      cachedInputPer1m: 14700n,
      outputPer1m: 1176000n,
      cacheWritePer1m: 80850n,
      cacheWrite1hPer1m: 129360n,
    });
    assert.equal(config.pricing?.rate, 98000n);
    assert.equal(config.pricing?.margin.toString(), '0.2');
    assert.equal(model?.dollar?.usd.inputPer1m?.toString(), '0.55');
  });

  it("a model's margin replaces the default; price: in credits wins key by key", () => {
    const config = parse(`
pricing: { rate: 98000, margin: 0.2 }
models:${MODEL}    price_usd: { input_per_1m: 1.25, cached_input_per_1m: 0.125, output_per_1m: 10 }
    price: { output_per_1m: 5 }
    margin: 0.30
`);
    const model = config.models.get('svc-pro');
    assert.deepEqual(model?.price, { inputPer1m: 159250n, cachedInputPer1m: 15925n, outputPer1m: 5n });
    assert.equal(model?.dollar?.margin?.toString(), '0.3');
    assert.deepEqual(
      model?.dollar && dollarPrice(model.dollar, 100000n, Decimal.ZERO),
      { inputPer1m: 125000n, cachedInputPer1m: 12500n, outputPer1m: 5n },
      'the same model at another rate and margin',
    );
  });

  it('an embedding model may leave its output price out', () => {
    const config = parse(`
pricing: { rate: 50000 }
models:
  emb:
    kind: embedding
    provider: openai
    base_url: https://api.example.com/v1
    upstream_model: text-embedding-3-small
    price_usd: { input_per_1m: 0.02 }
`);
    assert.deepEqual(config.models.get('emb')?.price, { inputPer1m: 1000n, outputPer1m: 0n });
  });

  it('refuses price_usd on tools, naming what is not supported (media models: test/pricing/media-dollar-config.test.ts)', () => {
    rejects(
      'tools:\n  web_search:\n    provider: sandbox\n    price: 5\n    price_usd: 0.01\n',
      'config tools.web_search.price_usd: is not supported for tools (maps, shopping, web_search and the rest are priced in credits per call or per 1M tokens): give price in credits',
    );
  });

  it('refuses price_usd without pricing.rate, naming the key', () => {
    rejects(
      `models:${MODEL}    price_usd: { input_per_1m: 1, output_per_1m: 2 }\n`,
      'config models.svc-pro.price_usd: needs pricing.rate (toman per US dollar) to turn dollars into credits',
    );
  });

  it('refuses a negative margin, a negative or malformed dollar price, a rate of 0, a margin without price_usd', () => {
    const priced = `models:${MODEL}    price_usd: { input_per_1m: 1, output_per_1m: 2 }\n`;
    rejects(
      `pricing: { rate: 98000, margin: -0.1 }\n${priced}`,
      /^config pricing\.margin: must be a non-negative number up to 100 \(got -0\.1\)$/,
    );
    rejects(
      `pricing: { rate: 98000 }\n${priced}    margin: -0.05\n`,
      /^config models\.svc-pro\.margin: must be a non-negative/,
    );
    rejects(`pricing: { rate: 0 }\n${priced}`, /^config pricing\.rate: must be a positive integer/);
    rejects(
      `pricing: { rate: 98000.5 }\n${priced}`,
      /^config pricing\.rate: must be a positive integer \(got the fraction 98000\.5\)$/,
    );
    rejects(
      `pricing: { rate: 98000 }\nmodels:${MODEL}    price_usd: { input_per_1m: -1, output_per_1m: 2 }\n`,
      /^config models\.svc-pro\.price_usd\.input_per_1m: must be a non-negative number/,
    );
    rejects(
      `pricing: { rate: 98000 }\nmodels:${MODEL}    price_usd: { input_per_1m: "one", output_per_1m: 2 }\n`,
      /^config models\.svc-pro\.price_usd\.input_per_1m: must be a non-negative number up to 1000000 \(got the string "one"\)$/,
    );
    rejects(
      `pricing: { rate: 98000 }\nmodels:${MODEL}    price_usd: { input_per_1m: 1 }\n`,
      'config models.svc-pro.price_usd.output_per_1m: is required (in price_usd, or in credits under price)',
    );
    rejects(
      `models:${MODEL}    price: { input_per_1m: 1, output_per_1m: 2 }\n    margin: 0.1\n`,
      'config models.svc-pro.margin: applies to price_usd only (this model is priced in credits)',
    );
  });

  it('a dollar price may come from the environment, read as exact text', () => {
    const config = parse(
      `pricing: { rate: 98000, margin: 0.2 }\nmodels:${MODEL}    price_usd: { input_per_1m: "\${IN}", output_per_1m: 1 }\n`,
      { IN: '0.55' },
    );
    assert.equal(config.models.get('svc-pro')?.price.inputPer1m, 64680n);
  });

  it('an upstream weight written as a fraction still reads as a share', () => {
    const config = parse(`
models:
  m:
    price: { input_per_1m: 1, output_per_1m: 1 }
    upstreams:
      - { provider: sandbox, weight: 0.5 }
      - { provider: sandbox, weight: 1.5 }
`);
    assert.deepEqual(
      config.models.get('m')?.upstreams.map((u) => u.weight),
      [0.5, 1.5],
    );
  });
});
