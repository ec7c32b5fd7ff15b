import assert from 'node:assert/strict';
import { parseConfig } from '../../core/config/load';
import { Decimal } from '../../core/config/decimal';
import { listPrices, mediaPriceAt, pricedModel, pricingJson } from '../../core/pricing/prices';
import { dollarsOf, unitUsd60, upstreamUsd } from '../../core/pricing/report';
import { tokenCost } from '../../core/chat/pricing';

/*
 * price_usd on media models (SPEC §14, §15): every unit price form and the token tariff of a media
 * model in dollars, each credit price ceil(usd × rate × (1 + margin)) in exact decimals; `price:`
 * in credits wins key by key; a malformed one refused naming its key.
 */

const parse = (text: string) => parseConfig(text, {}, 'test.yaml');

function rejects(text: string, message: string): void {
  assert.throws(
    () => parse(text),
    (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.equal(error.message, message);
      return true;
    },
  );
}

const dec = (text: string): Decimal => Decimal.parse(text) ?? assert.fail(text);

const CONFIG = `
pricing: { rate: 98000, margin: 0.2 }
models:
  pic:
    kind: image
    provider: sandbox
    price_usd: { per_image: { "1024x1024/high": 0.55, "1024x1024/low": 0.011 } }
    price: { per_image: { "1024x1024/low": 1000, "1536x1024/high": 30000 } }
  voice:
    kind: speech
    provider: sandbox
    price_usd: { per_1m_characters: 15 }
  ears:
    kind: transcription
    provider: sandbox
    price_usd: { per_minute: 0.006 }
    margin: 0.3
  ranker:
    kind: rerank
    provider: sandbox
    price_usd: { per_search: 0.002 }
  gpt-pic:
    kind: image
    provider: sandbox
    price_usd: { input_per_1m: 5, output_per_1m: 40 }
    price: { output_per_1m: 7 }
  guard:
    kind: moderation
    provider: sandbox
    price_usd: { input_per_1m: 0.1 }
`;

describe('price_usd on media models: the configuration (SPEC §14, §15)', () => {
  const config = parse(CONFIG);
  const model = (id: string) => config.models.get(id) ?? assert.fail(id);

  it('per image: ceil(0.55 × 98000 × 1.2) is 64680 (not the float 64681); price: in credits wins per SIZE/QUALITY', () => {
    assert.equal(0.55 * 98000 * 1.2, 64680.00000000001, 'floating point would round this up');
    const pic = model('pic');
    assert.deepEqual(pic.mediaPrice, {
      form: 'per_image',
      perImage: new Map([
        ['1024x1024/high', 64680n],
        ['1024x1024/low', 1000n],
        ['1536x1024/high', 30000n],
      ]),
    });
    assert.equal(pic.dollar?.unit?.usd.get('1024x1024/low')?.toString(), '0.011');
  });

  it('per 1M characters, per minute (its own margin), per search; each at another rate and margin too', () => {
    // 15 × 98000 × 1.2; 0.006 × 98000 × 1.3 = 764.4; 0.002 × 98000 × 1.2 = 235.2.
    assert.deepEqual(model('voice').mediaPrice, { form: 'per_1m_characters', credits: 1_764_000n });
    assert.deepEqual(model('ears').mediaPrice, { form: 'per_minute', credits: 765n });
    assert.deepEqual(model('ranker').mediaPrice, { form: 'per_search', credits: 236n });
    // At 150000 with an account's margin of 0: 0.9, 2250000 and 300.
    const at = (id: string) => mediaPriceAt(model(id), config, 150_000n, Decimal.ZERO);
    assert.deepEqual(at('ears'), { form: 'per_minute', credits: 900n });
    assert.deepEqual(at('voice'), { form: 'per_1m_characters', credits: 2_250_000n });
    assert.deepEqual(at('ranker'), { form: 'per_search', credits: 300n });
    assert.deepEqual(at('pic'), {
      form: 'per_image',
      perImage: new Map([
        ['1024x1024/high', 82500n],
        ['1024x1024/low', 1000n],
        ['1536x1024/high', 30000n],
      ]),
    });
  });

  it('a token-priced media model in dollars: its tariff resolved as a chat model’s, credits winning key by key', () => {
    assert.deepEqual(model('gpt-pic').mediaPrice, { form: 'tokens' });
    assert.deepEqual(model('gpt-pic').price, { inputPer1m: 588_000n, outputPer1m: 7n });
    assert.deepEqual(model('guard').mediaPrice, { form: 'tokens' });
    assert.deepEqual(model('guard').price, { inputPer1m: 11_760n, outputPer1m: 0n });
  });

  it('the usage record keeps the credit and dollar prices, rate and margin; the report reads them back exactly', () => {
    const priced = pricedModel(model('pic'), config, 98000n);
    const json = pricingJson(priced, '1024x1024/high');
    assert.deepEqual(JSON.parse(json), {
      price: { per_image: { '1024x1024/high': 64680, '1024x1024/low': 1000, '1536x1024/high': 30000 } },
      price_usd: { per_image: { '1024x1024/high': 0.55, '1024x1024/low': 0.011 } },
      rate: 98000,
      margin: 0.2,
      image_price: '1024x1024/high',
    });
    const dollars = dollarsOf(json) ?? assert.fail('dollars');
    // Three images at $0.55: $1.65, in sixtieths.
    assert.equal(unitUsd60(dollars, 3n)?.dividedBy(60n).toString(), '1.65');
    const ears = dollarsOf(pricingJson(pricedModel(model('ears'), config, 98000n))) ?? assert.fail('ears');
    // 7 seconds at $0.006 a minute: $0.0007.
    assert.equal(unitUsd60(ears, 7n)?.dividedBy(60n).toString(), '0.0007');
    const voice = dollarsOf(pricingJson(pricedModel(model('voice'), config, 98000n))) ?? assert.fail('voice');
    assert.equal(unitUsd60(voice, 15n)?.dividedBy(60n).toString(), '0.000225');
    const ranker = dollarsOf(pricingJson(pricedModel(model('ranker'), config, 98000n))) ?? assert.fail('ranker');
    assert.equal(unitUsd60(ranker, 2n)?.dividedBy(60n).toString(), '0.004');
    // A credit-priced media model keeps its prices, with no dollar behind them.
    assert.equal(dollarsOf('{"price":{"per_minute":600}}'), undefined);
  });

  it('image_input_per_1m: in dollars or credits, defaulting to input_per_1m; settled, recorded and reported apart', () => {
    const images = parse(`
pricing: { rate: 98000, margin: 0.2 }
models:
  usd:
    kind: image
    provider: sandbox
    price_usd: { input_per_1m: 5, image_input_per_1m: 10, output_per_1m: 40 }
  mixed:
    kind: image
    provider: sandbox
    price_usd: { input_per_1m: 5, image_input_per_1m: 10, output_per_1m: 40 }
    price: { image_input_per_1m: 900000 }
  credits:
    kind: image
    provider: sandbox
    price: { input_per_1m: 700, image_input_per_1m: 1400, output_per_1m: 2800 }
  plain:
    kind: image
    provider: sandbox
    price_usd: { input_per_1m: 5, output_per_1m: 40 }
`);
    const get = (id: string) => images.models.get(id) ?? assert.fail(id);
    // ceil(10 × 98000 × 1.2) = 1176000; credits win key by key.
    assert.equal(get('usd').price.imageInputPer1m, 1_176_000n);
    assert.equal(get('mixed').price.imageInputPer1m, 900_000n);
    assert.equal(get('credits').price.imageInputPer1m, 1400n);
    assert.equal(get('plain').price.imageInputPer1m, undefined);
    // Text at input, images at image_input, output at output: 50 × 700 + 646 × 1400 + 4160 × 2800, / 1e6 rounded up.
    assert.equal(tokenCost(get('credits').price, 696, 4160, 646), 13n);
    assert.equal(tokenCost(get('credits').price, 1_000_000, 0, 1_000_000), 1400n);
    assert.equal(tokenCost(get('credits').price, 1_000_000, 0, 0), 700n);
    // Absent: the images at the input price.
    assert.equal(tokenCost(get('plain').price, 1_000_000, 0, 1_000_000), 588_000n);
    // More image tokens than input reported: capped by the input.
    assert.equal(tokenCost(get('credits').price, 10, 0, 1_000_000), 1n);

    // At a new rate: the record keeps the key in credits and in dollars; the report prices images apart.
    const json = pricingJson(pricedModel(get('usd'), images, 100_000n));
    assert.deepEqual(JSON.parse(json), {
      price: {
        input_per_1m: 600_000,
        output_per_1m: 4_800_000,
        cached_input_per_1m: 600_000,
        cache_write_per_1m: 600_000,
        cache_write_1h_per_1m: 600_000,
        image_input_per_1m: 1_200_000,
      },
      price_usd: { input_per_1m: 5, output_per_1m: 40, image_input_per_1m: 10 },
      rate: 100_000,
      margin: 0.2,
    });
    const dollars = dollarsOf(json) ?? assert.fail('dollars');
    const tokens = { input: 696n, output: 4160n, cached: 0n, cacheWrite: 0n, cacheWrite1h: 0n };
    assert.equal(upstreamUsd(dollars.usd, { ...tokens, imageInput: 646n }).toString(), '0.17311');
    assert.equal(upstreamUsd(dollars.usd, tokens).toString(), '0.16988');
    const plain = dollarsOf(pricingJson(pricedModel(get('plain'), images, 100_000n))) ?? assert.fail('plain');
    assert.equal(upstreamUsd(plain.usd, { ...tokens, imageInput: 646n }).toString(), '0.16988');

    // svc price list: the key on image token tariffs (defaulted when not given), never elsewhere.
    const listed = Object.fromEntries(listPrices(images, 100_000n).map((m) => [m.id, m]));
    assert.equal(listed['usd']?.price['image_input_per_1m'], 1_200_000n);
    assert.equal(listed['plain']?.price['image_input_per_1m'], 600_000n);
    assert.deepEqual(listed['usd']?.priceUsd, {
      input_per_1m: dec('5'),
      output_per_1m: dec('40'),
      image_input_per_1m: dec('10'),
    });
    const chat = listPrices(config, 100_000n).find((m) => m.id === 'voice');
    assert.equal(chat?.price['image_input_per_1m'], undefined);
  });

  it('svc price list: the dollar prices under the YAML keys, and the credit prices in force', () => {
    const listed = Object.fromEntries(listPrices(config, 100_000n).map((m) => [m.id, m]));
    assert.deepEqual(listed['pic']?.priceUsd, {
      per_image: { '1024x1024/high': dec('0.55'), '1024x1024/low': dec('0.011') },
    });
    assert.deepEqual(listed['pic']?.price, {
      per_image: { '1024x1024/high': 66000n, '1024x1024/low': 1000n, '1536x1024/high': 30000n },
    });
    assert.deepEqual(listed['ears']?.price, { per_minute: 780n });
    assert.equal(listed['ears']?.margin?.toString(), '0.3');
  });

  it('refuses a malformed media price_usd, naming the key', () => {
    const head = 'pricing: { rate: 98000 }\nmodels:\n  p:\n    provider: sandbox\n';
    const cases: [string, string][] = [
      [
        '    kind: image\n    price_usd: { per_image: { "big/high": 0.1 } }\n',
        'config models.p.price_usd.per_image.big/high: is not "SIZE/QUALITY" (e.g. "1024x1024/high")',
      ],
      [
        '    kind: image\n    price_usd: { per_image: { "1024x1024/high": -1 } }\n',
        'config models.p.price_usd.per_image.1024x1024/high: must be a non-negative number up to 1000000 (got -1)',
      ],
      [
        '    kind: image\n    price_usd: { per_image: {} }\n',
        'config models.p.price_usd.per_image: must map "SIZE/QUALITY" to US dollars per image, e.g. { "1024x1024/high": 0.167 }',
      ],
      [
        '    kind: image\n    price_usd: { per_minute: 0.1 }\n',
        'config models.p.price_usd.per_minute: is not a price of image models ({ per_image: { "SIZE/QUALITY": USD } } or a token tariff in US dollars)',
      ],
      [
        '    kind: image\n    price_usd: { per_image: { "1024x1024/high": 0.1 }, input_per_1m: 1 }\n',
        'config models.p.price_usd: takes per_image alone',
      ],
      [
        '    kind: image\n    price_usd: { per_image: { "1024x1024/high": 0.1 } }\n    price: { input_per_1m: 1 }\n',
        'config models.p.price_usd: is per_image but price is a token tariff: give both in one form (credits in price win key by key)',
      ],
      [
        '    kind: rerank\n    price_usd: { input_per_1m: 1 }\n',
        'config models.p.price_usd: must be { per_search: USD }',
      ],
      [
        '    kind: transcription\n    price_usd: { per_minute: "x" }\n',
        'config models.p.price_usd.per_minute: must be a non-negative number up to 1000000 (got the string "x")',
      ],
      [
        '    kind: speech\n    price_usd: { per_1m_chars: 15 }\n',
        "config models.p.price_usd.per_1m_chars: unknown key (expected per_1m_characters, or a token tariff's: input_per_1m, output_per_1m, cached_input_per_1m, cache_write_per_1m, cache_write_1h_per_1m)",
      ],
      [
        '    kind: speech\n    price_usd: 5\n',
        'config models.p.price_usd: must be a mapping ({ per_1m_characters: USD } or a token tariff in US dollars)',
      ],
      [
        '    kind: moderation\n    price: 0\n    price_usd: { input_per_1m: 1 }\n',
        'config models.p.price_usd: is a token tariff but price is 0 (free): give both in one form (credits in price win key by key)',
      ],
      [
        '    kind: speech\n    price: { per_1m_characters: 5 }\n    margin: 0.1\n',
        'config models.p.margin: applies to price_usd only (this model is priced in credits)',
      ],
    ];
    // image_input_per_1m (SPEC §14): a token-billed image model's only.
    cases.push(
      [
        '    price: { input_per_1m: 1, output_per_1m: 2, image_input_per_1m: 3 }\n',
        'config models.p.price.image_input_per_1m: prices the input images of a token-billed image model: only image models (kind: image) take it, this one is kind: chat',
      ],
      [
        '    kind: speech\n    price_usd: { input_per_1m: 1, image_input_per_1m: 3 }\n',
        'config models.p.price_usd.image_input_per_1m: prices the input images of a token-billed image model: only image models (kind: image) take it, this one is kind: speech',
      ],
      [
        '    kind: embedding\n    price: { input_per_1m: 1, image_input_per_1m: 3 }\n',
        'config models.p.price.image_input_per_1m: prices the input images of a token-billed image model: only image models (kind: image) take it, this one is kind: embedding',
      ],
      [
        '    kind: image\n    price: { per_image: { "1024x1024/high": 5 }, image_input_per_1m: 3 }\n',
        'config models.p.price: takes per_image alone',
      ],
      [
        '    kind: image\n    price_usd: { input_per_1m: 1, image_input_per_1m: -1 }\n',
        'config models.p.price_usd.image_input_per_1m: must be a non-negative number up to 1000000 (got -1)',
      ],
    );
    for (const [model, message] of cases) rejects(head + model, message);
    rejects(
      'models:\n  p:\n    kind: rerank\n    provider: sandbox\n    price_usd: { per_search: 0.002 }\n',
      'config models.p.price_usd: needs pricing.rate (toman per US dollar) to turn dollars into credits',
    );
  });
});
