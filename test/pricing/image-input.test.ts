import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ChannelCredentials } from '@grpc/grpc-js';
import { createChannel, createClient, Metadata, type Channel } from 'nice-grpc';
import { ModelServiceDefinition, type Model } from '../../gen/svc/core/v1/models';
import { runSvc, svcJson } from '../cli/run-svc';
import { consoleClient, createConsoleUser } from '../console/helpers';
import {
  FAKE_EDIT_IMAGE_TOKENS,
  FAKE_IMAGE_TOKENS,
  startFakeMediaUpstream,
  type FakeMediaUpstream,
} from '../fakes/media-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * Token-billed image models price their input images apart (SPEC §14: `image_input_per_1m`, in
 * credits or in dollars, defaulting to `input_per_1m`): an edit is held with every uploaded image
 * at the dearer of the image and text input rates, settled from the upstream's
 * `input_tokens_details.image_tokens` at the image price and its text at the input price; the
 * usage record, `svc price list`, the Prices page and the margin report say it. And ModelService's
 * ListModels / GetModel answer at the rate in force and the caller's margin (SPEC §15), as
 * admission prices. All computed here apart from the code under test, in integers.
 */

const RATE = 98000n;
const NEW_RATE = 120000n;
/** svc's bound of one uploaded image's tokens in a hold (core/media/runner.ts), and its prompt framing. */
const IMAGE_BOUND = 10_000n;
const FRAMING = 16n;
const MAX_OUTPUT = 5000n;

const config = (upstream: FakeMediaUpstream): string => {
  const gpt = `provider: openai
    base_url: ${upstream.baseUrl}
    api_key: k
    upstream_model: gpt-image-1
    max_output_tokens: ${MAX_OUTPUT}`;
  return `
pricing: { rate: ${RATE}, margin: 0.2 }
models:
  i-credits:
    kind: image
    ${gpt}
    price: { input_per_1m: 700000, image_input_per_1m: 1400000, output_per_1m: 2800000 }
  i-cheap-images:
    kind: image
    ${gpt}
    price: { input_per_1m: 700000, image_input_per_1m: 100000, output_per_1m: 2800000 }
  i-usd:
    kind: image
    ${gpt}
    price_usd: { input_per_1m: 5, image_input_per_1m: 10, output_per_1m: 40 }
  i-default:
    kind: image
    ${gpt}
    price_usd: { input_per_1m: 5, output_per_1m: 40 }
  d-chat:
    provider: sandbox
    price_usd: { input_per_1m: 1.25, output_per_1m: 10 }
  d-dalle:
    kind: image
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: k
    upstream_model: dall-e-3
    price_usd: { per_image: { "1024x1024/standard": 0.04 } }
  c-chat:
    provider: sandbox
    price: { input_per_1m: 100, output_per_1m: 200 }
`;
};

/** A decimal's text as numerator and denominator. */
function fraction(text: string): [bigint, bigint] {
  const [whole = '0', part = ''] = text.split('.');
  return [BigInt(`${whole}${part}`), 10n ** BigInt(part.length)];
}

/** ceil(usd × rate × (1 + margin)), in integers. */
function credits(usd: string, rate: bigint, margin = '0.2'): bigint {
  const [un, ud] = fraction(usd);
  const [mn, md] = fraction(margin);
  const num = un * rate * (md + mn);
  const den = ud * md;
  return (num + den - 1n) / den;
}

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

/** ceil((text × input + images × image + output × out) / 1e6), per SPEC §6/§14. */
function tokenCost(
  rates: { input: bigint; image: bigint; output: bigint },
  tokens: { text: bigint; images: bigint; output: bigint },
): bigint {
  return ceilDiv(tokens.text * rates.input + tokens.images * rates.image + tokens.output * rates.output, 1_000_000n);
}

const PROMPT = 'add a hat';
// Two images and a mask: three uploads in the hold; the fake reports image tokens for the two images.
const UPLOADS = 3n;
const REPORTED_IMAGE_TOKENS = BigInt(2 * FAKE_EDIT_IMAGE_TOKENS);
const REPORTED = {
  text: BigInt(FAKE_IMAGE_TOKENS.input_tokens),
  images: REPORTED_IMAGE_TOKENS,
  output: BigInt(FAKE_IMAGE_TOKENS.output_tokens),
};
/** The hold's token bounds of one edit (n = 1): the prompt's bytes and framing, every upload's bound, the output limit. */
const HOLD_TOKENS = {
  text: BigInt(Buffer.byteLength(PROMPT)) + FRAMING,
  images: UPLOADS * IMAGE_BOUND,
  output: MAX_OUTPUT,
};

describe('image_input_per_1m: token-billed image models price their input images (SPEC §14, §15)', function () {
  this.timeout(120_000);
  let upstream: FakeMediaUpstream;
  let svc: TestSvc;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let channel: Channel;

  before(async () => {
    upstream = await startFakeMediaUpstream();
    svc = await startSvc({ config: config(upstream), priceCacheMs: 0 });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-image-input-'));
    fs.writeFileSync(path.join(dir, 'svc.yaml'), config(upstream));
    env = { SVC_DATABASE_URL: svc.databaseUrl, SVC_CONFIG: path.join(dir, 'svc.yaml') };
    channel = createChannel(svc.coreAddress, ChannelCredentials.createInsecure());
  });

  after(async () => {
    channel?.close();
    await svc?.close();
    await upstream?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** POST /images/edits with two images and a mask; the answer's status, cost and request id. */
  async function edit(key: string, model: string): Promise<{ status: number; cost: bigint; id: string; body: string }> {
    const png = new Blob([Buffer.from('not really a png, the fake does not look')], { type: 'image/png' });
    const form = new FormData();
    form.append('model', model);
    form.append('prompt', PROMPT);
    form.append('image[]', png, 'a.png');
    form.append('image[]', png, 'b.png');
    form.append('mask', png, 'm.png');
    const res = await fetch(`${svc.baseUrl}/v1/openai/images/edits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    return {
      status: res.status,
      cost: BigInt(res.headers.get('x-svc-cost') ?? '-1'),
      id: res.headers.get('x-request-id') ?? '',
      body: await res.text(),
    };
  }

  it('an edit is held with every upload at the image price and settled from image_tokens, to the credit', async () => {
    const rates = { input: 700_000n, image: 1_400_000n, output: 2_800_000n };
    const hold = tokenCost(rates, HOLD_TOKENS);
    // A wallet one credit short of the hold is refused before the upstream is asked.
    const poor = await svc.createFundedKey(hold - 1n);
    const asked = upstream.requests.length;
    const refused = await edit(poor.key, 'i-credits');
    assert.equal(refused.status, 429, refused.body);
    assert.match(refused.body, /insufficient_quota/);
    assert.equal(upstream.requests.length, asked, 'the upstream was not asked');
    assert.equal((await svc.wallet(poor.accountId)).balance, hold - 1n);

    // Exactly the hold: served, and charged the text at input_per_1m and the images at image_input_per_1m.
    const { key, accountId } = await svc.createFundedKey(hold);
    const served = await edit(key, 'i-credits');
    assert.equal(served.status, 200, served.body);
    const usage = (JSON.parse(served.body) as { usage: Record<string, unknown> }).usage;
    assert.deepEqual(usage['input_tokens_details'], {
      text_tokens: FAKE_IMAGE_TOKENS.input_tokens,
      image_tokens: 2 * FAKE_EDIT_IMAGE_TOKENS,
    });
    const cost = tokenCost(rates, REPORTED);
    assert.equal(served.cost, cost);
    // Not the input price for the images: that would be another number.
    assert.notEqual(cost, tokenCost({ ...rates, image: rates.input }, REPORTED));
    const wallet = await svc.wallet(accountId);
    assert.deepEqual([wallet.balance, wallet.held], [hold - cost, 0n]);
    const charges = (await svc.ledger(accountId)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
    assert.deepEqual(charges, [cost]);
  });

  it('images cheaper than text are held at the input rate: an upstream that does not split its input is covered', async () => {
    // Held as if every upload's tokens were text: the dearer of the two input rates.
    const rates = { input: 700_000n, image: 100_000n, output: 2_800_000n };
    const hold = tokenCost({ ...rates, image: rates.input }, HOLD_TOKENS);
    assert.ok(hold > tokenCost(rates, HOLD_TOKENS));
    const { key, accountId } = await svc.createFundedKey(hold);
    // The upstream reports its whole bound as input tokens with no details: all at input_per_1m.
    const input = Number(HOLD_TOKENS.text + HOLD_TOKENS.images);
    upstream.patchNext({
      usage: { input_tokens: input, output_tokens: Number(MAX_OUTPUT), total_tokens: input + Number(MAX_OUTPUT) },
    });
    const served = await edit(key, 'i-cheap-images');
    assert.equal(served.status, 200, served.body);
    assert.equal(served.cost, hold, 'charged in full, within the hold');
    assert.equal((await svc.wallet(accountId)).balance, 0n);
    // With the split reported, the images are at their own (lower) price.
    const next = await svc.createFundedKey(hold);
    const split = await edit(next.key, 'i-cheap-images');
    assert.equal(split.cost, tokenCost(rates, REPORTED));
  });

  it('priced from the dollar: charged at the rate, the record, svc price list, the Prices page and the margin report say it', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000_000);
    const usd = await edit(key, 'i-usd');
    const dflt = await edit(key, 'i-default');
    assert.equal(usd.status, 200, usd.body);
    assert.equal(dflt.status, 200, dflt.body);
    const usdRates = { input: credits('5', RATE), image: credits('10', RATE), output: credits('40', RATE) };
    // No image_input_per_1m: the images at input_per_1m.
    const dfltRates = { input: credits('5', RATE), image: credits('5', RATE), output: credits('40', RATE) };
    assert.equal(usd.cost, tokenCost(usdRates, REPORTED));
    assert.equal(dflt.cost, tokenCost(dfltRates, REPORTED));
    assert.equal(usd.cost, ceilDiv(50n * 588_000n + 646n * 1_176_000n + 4160n * 4_704_000n, 1_000_000n));

    // Each record keeps the image price in credits and the dollar price behind it.
    const listed = await runSvc(['usage', '--account', accountId, '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    const records = (JSON.parse(listed.stdout) as { records: { request_id: string; pricing: unknown }[] }).records;
    const tariff = (r: typeof usdRates) => ({
      input_per_1m: Number(r.input),
      output_per_1m: Number(r.output),
      cached_input_per_1m: Number(r.input),
      cache_write_per_1m: Number(r.input),
      cache_write_1h_per_1m: Number(r.input),
      image_input_per_1m: Number(r.image),
    });
    assert.deepEqual(records.find((r) => r.request_id === usd.id)?.pricing, {
      price: tariff(usdRates),
      price_usd: { input_per_1m: 5, output_per_1m: 40, image_input_per_1m: 10 },
      rate: Number(RATE),
      margin: 0.2,
    });
    assert.deepEqual(records.find((r) => r.request_id === dflt.id)?.pricing, {
      price: tariff(dfltRates),
      price_usd: { input_per_1m: 5, output_per_1m: 40 },
      rate: Number(RATE),
      margin: 0.2,
    });

    // The margin report: upstream dollars = text × $5 + images × $10 (or $5) + output × $40, per 1M.
    const today = new Date().toISOString().slice(0, 10);
    const op = consoleClient(svc.baseUrl);
    assert.equal((await op.signInOperator(svc.adminToken)).status, 303);
    const csv = await op.get(`/pricing/report.csv?from=${today}&to=${today}`);
    assert.equal(csv.status, 200);
    const rows = new Map(
      csv.body
        .trim()
        .split('\r\n')
        .slice(1)
        .map((line) => line.split(','))
        .map(([, model = '', calls = '', revenue = '', dollars = '', cost = '']) => [
          model,
          [BigInt(calls), BigInt(revenue), dollars, BigInt(cost)] as const,
        ]),
    );
    // (50 × 5 + 646 × 10 + 4160 × 40) / 1e6 = 0.17311; (696 × 5 + 4160 × 40) / 1e6 = 0.16988.
    assert.deepEqual(rows.get('i-usd'), [1n, usd.cost, '0.17311', ceilDiv(17311n * RATE, 100_000n)]);
    assert.deepEqual(rows.get('i-default'), [1n, dflt.cost, '0.16988', ceilDiv(16988n * RATE, 100_000n)]);

    // svc price list --json: the key on image models (defaulted where not given), never on chat models.
    const set = await runSvc(['price', 'rate', 'set', String(NEW_RATE)], env);
    assert.equal(set.code, 0, set.stderr);
    const list = (await svcJson(['price', 'list'], env)) as {
      models: { id: string; price_usd: Record<string, number> | null; price: Record<string, number> }[];
    };
    const byId = Object.fromEntries(list.models.map((m) => [m.id, m]));
    assert.deepEqual(byId['i-usd']?.price_usd, { input_per_1m: 5, output_per_1m: 40, image_input_per_1m: 10 });
    assert.equal(byId['i-usd']?.price['image_input_per_1m'], Number(credits('10', NEW_RATE)));
    assert.equal(byId['i-default']?.price['image_input_per_1m'], Number(credits('5', NEW_RATE)));
    assert.equal(byId['i-credits']?.price['image_input_per_1m'], 1_400_000);
    assert.equal(byId['d-chat']?.price['image_input_per_1m'], undefined);
    assert.equal(byId['c-chat']?.price['image_input_per_1m'], undefined);
    const text = await runSvc(['price', 'list'], env);
    const line = text.stdout.split('\n').find((l) => l.startsWith('i-usd ')) ?? assert.fail(text.stdout);
    assert.match(line, new RegExp(`/${credits('10', NEW_RATE)} .*image_input_per_1m=10`));

    // The user's Prices page: the input images' price in toman, from its dollars.
    const user = await createConsoleUser(svc, { name: 'I', email: 'i@example.com', balance: 0n, keyName: 'k' });
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    const body = (await c.get('/prices')).body;
    const cell = (id: string): string =>
      (new RegExp(`data-testid="prices-${id}">([\\s\\S]*?)</td>`).exec(body)?.[1] ?? assert.fail(`${id} on the page`))
        .replace(/\s+/g, ' ')
        .replace(/\s*>\s*/g, '>')
        .replace(/\s*<\s*/g, '<');
    const toman = (n: bigint): string => Number(n).toLocaleString('en-US');
    assert.match(
      cell('i-usd'),
      new RegExp(`${toman(credits('10', NEW_RATE))} toman<span class="hint">input images, per 1M tokens · from \\$10<`),
    );
    assert.match(cell('i-credits'), /1,400,000 toman<span class="hint">input images, per 1M tokens<\/span>/);
    assert.doesNotMatch(cell('c-chat'), /input images/);
  });

  it('ModelService ListModels and GetModel answer at the rate in force and the caller account’s margin', async () => {
    const models = createClient(ModelServiceDefinition, channel);
    const { key, accountId } = await svc.createFundedKey(1000);
    const metadata = new Metadata({ authorization: `Bearer ${key}` });
    const at = async (rate: bigint, margin: string) => {
      const listed = (await models.listModels({}, { metadata })).models;
      const one = (id: string): Model => listed.find((m) => m.id === id) ?? assert.fail(id);
      const got = (await models.getModel({ modelId: 'd-chat' }, { metadata })).model ?? assert.fail('d-chat');
      const expected = { inputPer1m: credits('1.25', rate, margin), outputPer1m: credits('10', rate, margin) };
      for (const model of [one('d-chat'), got])
        assert.deepEqual(
          { inputPer1m: model.price?.inputPer1m, outputPer1m: model.price?.outputPer1m },
          expected,
          `d-chat at ${rate}, margin ${margin}`,
        );
      assert.deepEqual(
        one('d-dalle').unitPrices.map((u) => [u.credits, u.per, u.size, u.quality]),
        [[credits('0.04', rate, margin), 'image', '1024x1024', 'standard']],
      );
      // A model priced in credits is untouched.
      assert.deepEqual([one('c-chat').price?.inputPer1m, one('c-chat').price?.outputPer1m], [100n, 200n]);
    };
    const current = BigInt(
      ((await svcJson(['price', 'history'], env)) as { rates: { rate: number }[] }).rates[0]?.rate ?? 0,
    );
    await at(current, '0.2');
    const changed = current === NEW_RATE ? RATE : NEW_RATE;
    const set = await runSvc(['price', 'rate', 'set', String(changed)], env);
    assert.equal(set.code, 0, set.stderr);
    await at(changed, '0.2');
    // The account's own margin replaces the default for its own calls, and only for them.
    const margin = await runSvc(['account', 'update', '--account', accountId, '--margin', '0.05'], env);
    assert.equal(margin.code, 0, margin.stderr);
    await at(changed, '0.05');
    const other = await svc.createFundedKey(1000);
    const theirs = (
      await models.getModel({ modelId: 'd-chat' }, { metadata: new Metadata({ authorization: `Bearer ${other.key}` }) })
    ).model;
    assert.equal(theirs?.price?.inputPer1m, credits('1.25', changed, '0.2'));
  });
});
