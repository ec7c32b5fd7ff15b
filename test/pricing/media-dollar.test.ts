import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Decimal } from '../../core/config/decimal';
import { sandboxWav } from '../../core/providers/media/sandbox';
import { runSvc, svcJson } from '../cli/run-svc';
import { consoleClient, createConsoleUser } from '../console/helpers';
import { startFakeMediaUpstream, FAKE_IMAGE_TOKENS, type FakeMediaUpstream } from '../fakes/media-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * Media models priced from the dollar (SPEC §14, §15), on two cores over one database (SQLite in
 * one process; MariaDB over gRPC with SVC_TEST_DATABASE=mysql SVC_TEST_TRANSPORT=grpc): each call
 * charged ceil(usd × rate × (1 + margin)) per unit at the rate in force when it was admitted, to
 * the credit; a call held across a rate change settles at its price; every record explains itself;
 * `svc price list`, the Prices page and the margin report agree with the formula, computed here
 * apart from the code under test (integers, never the code's decimals).
 */

const RATE = 98000n;
const NEW_RATE = 120000n;

const config = (upstream: FakeMediaUpstream): string => `
pricing: { rate: ${RATE}, margin: 0.2 }
models:
  d-image:
    kind: image
    provider: sandbox
    price_usd: { per_image: { "1024x1024/high": 0.167, "1024x1024/low": 0.011 } }
  d-tts:
    kind: speech
    provider: sandbox
    price_usd: { per_1m_characters: 15 }
  d-stt:
    kind: transcription
    provider: sandbox
    price_usd: { per_minute: 0.006 }
    margin: 0.3
  d-rerank:
    kind: rerank
    provider: sandbox
    price_usd: { per_search: 0.002 }
  d-dalle:
    kind: image
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: k
    upstream_model: dall-e-3
    price_usd: { per_image: { "1024x1024/standard": 0.04, "1024x1024/hd": 0.08 } }
  d-gpt-image:
    kind: image
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: k
    upstream_model: gpt-image-1
    max_output_tokens: 5000
    price_usd: { input_per_1m: 5, output_per_1m: 40 }
  c-image:
    kind: image
    provider: sandbox
    price: { per_image: { "1024x1024/low": 400 } }
`;

/** A decimal's text as numerator and denominator. */
function fraction(text: string): [bigint, bigint] {
  const [whole = '0', part = ''] = text.split('.');
  return [BigInt(`${whole}${part}`), 10n ** BigInt(part.length)];
}

/** ceil(usd × rate × (1 + margin)), in integers. */
function credits(usd: string, rate: bigint, margin: string): bigint {
  const [un, ud] = fraction(usd);
  const [mn, md] = fraction(margin);
  const num = un * rate * (md + mn);
  const den = ud * md;
  return (num + den - 1n) / den;
}

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

/** What the sandbox calls below cost at `rate` (the SPEC's per-unit rules over the formula). */
function sandboxCosts(rate: bigint) {
  return {
    // Two low images, then one with no quality asked: the dearest.
    imageLow: 2n * credits('0.011', rate, '0.2'),
    imageHigh: credits('0.167', rate, '0.2'),
    // 15 code points.
    speech: ceilDiv(15n * credits('15', rate, '0.2'), 1_000_000n),
    // 2.5 s of audio billed as 3 s of the per-minute price (the model's own margin 0.3).
    transcription: ceilDiv(3n * credits('0.006', rate, '0.3'), 60n),
    // 150 documents: two searches.
    rerank: 2n * credits('0.002', rate, '0.2'),
  };
}

describe('media models priced from the dollar (SPEC §14, §15)', function () {
  this.timeout(180_000);
  let upstream: FakeMediaUpstream;
  let a: TestSvc;
  let b: TestSvc;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    upstream = await startFakeMediaUpstream();
    a = await startSvc({ config: config(upstream), priceCacheMs: 0 });
    b = await startSvc({ config: config(upstream), priceCacheMs: 0, databaseUrl: a.databaseUrl });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-media-usd-'));
    fs.writeFileSync(path.join(dir, 'svc.yaml'), config(upstream));
    env = { SVC_DATABASE_URL: a.databaseUrl, SVC_CONFIG: path.join(dir, 'svc.yaml') };
  });

  after(async () => {
    await b?.close();
    await a?.close();
    await upstream?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function post(svc: TestSvc, key: string, route: string, body: unknown): Promise<{ cost: bigint; id: string }> {
    const res = await fetch(`${svc.baseUrl}/v1/openai${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = Buffer.from(await res.arrayBuffer()).toString('latin1');
    assert.equal(res.status, 200, text.slice(0, 300));
    return { cost: BigInt(res.headers.get('x-svc-cost') ?? '-1'), id: res.headers.get('x-request-id') ?? '' };
  }

  async function transcribe(svc: TestSvc, key: string): Promise<bigint> {
    const form = new FormData();
    form.append('model', 'd-stt');
    form.append('file', new Blob([sandboxWav(440, 2.5, 8000)], { type: 'audio/wav' }), 'a.wav');
    const res = await fetch(`${svc.baseUrl}/v1/openai/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    assert.equal(res.status, 200, await res.clone().text());
    return BigInt(res.headers.get('x-svc-cost') ?? '-1');
  }

  /** The sandbox calls, each kind, on `svc`: what each was charged. */
  async function sandboxRound(svc: TestSvc, key: string) {
    const documents = Array.from({ length: 150 }, (_, i) => `document ${i}`);
    return {
      imageLow: (
        await post(svc, key, '/images/generations', { model: 'd-image', prompt: 'a fox', n: 2, quality: 'low' })
      ).cost,
      imageHigh: (await post(svc, key, '/images/generations', { model: 'd-image', prompt: 'a fox' })).cost,
      speech: (await post(svc, key, '/audio/speech', { model: 'd-tts', input: 'Héllo, wörld! 👋', voice: 'alloy' }))
        .cost,
      transcription: await transcribe(svc, key),
      rerank: (await post(svc, key, '/rerank', { model: 'd-rerank', query: 'document 7', documents })).cost,
    };
  }

  it('charges every media kind to the credit at the rate in force; a call held across a change settles at its price', async () => {
    const { key, accountId } = await a.createFundedKey(1_000_000);
    // At 98000 on either core.
    const first = await sandboxRound(a, key);
    assert.deepEqual(first, sandboxCosts(RATE));
    assert.deepEqual(first, {
      imageLow: 2n * 1294n,
      imageHigh: 19640n,
      speech: 27n,
      transcription: 39n,
      rerank: 472n,
    });
    // A token-priced image model in dollars: its tariff at the rate ($5 and $40 per 1M tokens).
    const gpt = await post(b, key, '/images/generations', { model: 'd-gpt-image', prompt: 'a fox', quality: 'high' });
    assert.equal(
      gpt.cost,
      ceilDiv(
        BigInt(FAKE_IMAGE_TOKENS.input_tokens) * credits('5', RATE, '0.2') +
          BigInt(FAKE_IMAGE_TOKENS.output_tokens) * credits('40', RATE, '0.2'),
        1_000_000n,
      ),
    );
    // A credit-priced media model is untouched by the rate.
    assert.equal((await post(b, key, '/images/generations', { model: 'c-image', prompt: 'x' })).cost, 400n);

    // A call held at the upstream on core a, admitted at 98000; the rate changes; core b admits one after.
    const release = upstream.pause();
    const seen = upstream.requests.length;
    const held = post(a, key, '/images/generations', { model: 'd-dalle', prompt: 'a fox', quality: 'standard' });
    while (upstream.requests.length < seen + 1) await new Promise((r) => setTimeout(r, 20));
    const set = await runSvc(['price', 'rate', 'set', String(NEW_RATE), '--json'], env);
    assert.equal(set.code, 0, set.stderr);
    const after = post(b, key, '/images/generations', { model: 'd-dalle', prompt: 'a fox', quality: 'standard' });
    while (upstream.requests.length < seen + 2) await new Promise((r) => setTimeout(r, 20));
    release();
    const [heldCall, afterCall] = await Promise.all([held, after]);
    assert.equal(heldCall.cost, credits('0.04', RATE, '0.2'), 'held at 98000, settled at 98000');
    assert.equal(heldCall.cost, 4704n);
    assert.equal(afterCall.cost, credits('0.04', NEW_RATE, '0.2'), 'admitted after the change');
    assert.equal(afterCall.cost, 5760n);

    // The next calls, on either core, at the new rate.
    const second = await sandboxRound(b, key);
    assert.deepEqual(second, sandboxCosts(NEW_RATE));
    assert.notDeepEqual(second, first);

    // The ledger, to the credit.
    const charged = [...Object.values(first), ...Object.values(second), gpt.cost, 400n, heldCall.cost, afterCall.cost];
    const total = charged.reduce((s, c) => s + c, 0n);
    const ledger = (await a.ledger(accountId, 200)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
    assert.deepEqual(
      ledger.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)),
      charged.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)),
    );
    const wallet = await a.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n - total);
    assert.equal(wallet.held, 0n);

    // Each record explains its charge: credit and dollar prices, rate, margin (and the image size).
    const usage = await runSvc(['usage', '--account', accountId, '--json'], env);
    assert.equal(usage.code, 0, usage.stderr);
    const records = (
      JSON.parse(usage.stdout) as {
        records: { request_id: string; model: string | null; cost: number; media_units: number; pricing: unknown }[];
      }
    ).records;
    assert.deepEqual(records.find((r) => r.request_id === heldCall.id)?.pricing, {
      price: { per_image: { '1024x1024/standard': 4704, '1024x1024/hd': 9408 } },
      price_usd: { per_image: { '1024x1024/standard': 0.04, '1024x1024/hd': 0.08 } },
      rate: 98000,
      margin: 0.2,
      image_price: '1024x1024/standard',
    });
    assert.deepEqual(records.find((r) => r.request_id === afterCall.id)?.pricing, {
      price: { per_image: { '1024x1024/standard': 5760, '1024x1024/hd': 11520 } },
      price_usd: { per_image: { '1024x1024/standard': 0.04, '1024x1024/hd': 0.08 } },
      rate: 120000,
      margin: 0.2,
      image_price: '1024x1024/standard',
    });
    const stt = records.filter((r) => r.model === 'd-stt').map((r) => r.pricing);
    assert.deepEqual(stt, [
      { price: { per_minute: 936 }, price_usd: { per_minute: 0.006 }, rate: 120000, margin: 0.3 },
      { price: { per_minute: 765 }, price_usd: { per_minute: 0.006 }, rate: 98000, margin: 0.3 },
    ]);
    assert.deepEqual(records.find((r) => r.model === 'c-image')?.pricing, {
      price: { per_image: { '1024x1024/low': 400 } },
      image_price: '1024x1024/low',
    });

    // The margin report: revenue is the ledger's; upstream cost the units × the dollar prices.
    const today = new Date().toISOString().slice(0, 10);
    const op = consoleClient(a.baseUrl);
    assert.equal((await op.signInOperator(a.adminToken)).status, 303);
    const csv = await op.get(`/pricing/report.csv?from=${today}&to=${today}`);
    assert.equal(csv.status, 200);
    const rows = new Map(
      csv.body
        .trim()
        .split('\r\n')
        .slice(1)
        .map((line) => line.split(','))
        .map(([, model = '', calls = '', revenue = '', usd = '', cost = '', , unpriced = '']) => [
          model,
          { calls: BigInt(calls), revenue: BigInt(revenue), usd, cost: BigInt(cost), unpriced: BigInt(unpriced) },
        ]),
    );
    // Per model: [calls, revenue, upstream dollars, upstream credits at each call's rate].
    const expected: Record<string, [bigint, bigint, string, bigint]> = {
      // 2 × (2 × $0.011 + $0.167) = $0.378; × 98000 and × 120000 each half.
      'd-image': [4n, first.imageLow + first.imageHigh + second.imageLow + second.imageHigh, '0.378', 18522n + 22680n],
      // 2 × 15 characters at $15 per 1M: $0.00045.
      'd-tts': [2n, first.speech + second.speech, '0.00045', ceilDiv(225n * 98000n + 225n * 120000n, 1_000_000n)],
      // 2 × 3 s at $0.006 a minute: $0.0006.
      'd-stt': [2n, first.transcription + second.transcription, '0.0006', ceilDiv(3n * 98000n + 3n * 120000n, 10_000n)],
      // 2 × 2 searches at $0.002: $0.008.
      'd-rerank': [2n, first.rerank + second.rerank, '0.008', 392n + 480n],
      // Two standard images at $0.04, one at each rate.
      'd-dalle': [2n, heldCall.cost + afterCall.cost, '0.08', 3920n + 4800n],
      // 50 input tokens at $5 and 4160 output at $40 per 1M: $0.16665.
      'd-gpt-image': [1n, gpt.cost, '0.16665', ceilDiv(16665n * 98000n, 100_000n)],
    };
    for (const [model, [calls, revenue, usd, cost]] of Object.entries(expected)) {
      const row = rows.get(model) ?? assert.fail(`${model} in the report`);
      assert.deepEqual(
        { calls: row.calls, revenue: row.revenue, usd: row.usd, cost: row.cost, unpriced: row.unpriced },
        { calls, revenue, usd, cost, unpriced: 0n },
        model,
      );
      assert.equal(Decimal.parse(row.usd)?.toString(), usd);
    }
    assert.equal(rows.get('c-image')?.unpriced, 1n, 'a credit-priced model: its upstream cost unknown');
    // The operator's page shows the same report.
    const page = (await op.get(`/pricing?from=${today}&to=${today}`)).body;
    const report = /data-testid="margin-report"[\s\S]*?<\/table>/.exec(page)?.[0] ?? assert.fail('the report');
    for (const [model, [, , usd]] of Object.entries(expected))
      assert.match(
        report,
        new RegExp(`>${model}</td>(?:(?!</tr>)[\\s\\S])*\\$${usd.replace('.', '\\.')}[^0-9]`),
        model,
      );
  });

  it('svc price list --json and the Prices page agree with the formula for every media price kind', async () => {
    const list = (await svcJson(['price', 'list'], env)) as {
      rate: number;
      models: { id: string; margin: number | null; price_usd: unknown; price: unknown }[];
    };
    const rate = BigInt(list.rate);
    assert.equal(rate, NEW_RATE);
    const byId = Object.fromEntries(list.models.map((m) => [m.id, m]));
    const num = (n: bigint): number => Number(n);
    assert.deepEqual(byId['d-image'], {
      id: 'd-image',
      kind: 'image',
      margin: 0.2,
      price_usd: { per_image: { '1024x1024/high': 0.167, '1024x1024/low': 0.011 } },
      price: {
        per_image: {
          '1024x1024/high': num(credits('0.167', rate, '0.2')),
          '1024x1024/low': num(credits('0.011', rate, '0.2')),
        },
      },
      price_units: [
        { credits: num(credits('0.167', rate, '0.2')), unit: 'per image, 1024×1024 high' },
        { credits: num(credits('0.011', rate, '0.2')), unit: 'per image, 1024×1024 low' },
      ],
    });
    assert.deepEqual(
      [byId['d-tts']?.price_usd, byId['d-tts']?.price],
      [{ per_1m_characters: 15 }, { per_1m_characters: num(credits('15', rate, '0.2')) }],
    );
    assert.deepEqual(
      [byId['d-stt']?.margin, byId['d-stt']?.price_usd, byId['d-stt']?.price],
      [0.3, { per_minute: 0.006 }, { per_minute: num(credits('0.006', rate, '0.3')) }],
    );
    assert.deepEqual(
      [byId['d-rerank']?.price_usd, byId['d-rerank']?.price],
      [{ per_search: 0.002 }, { per_search: num(credits('0.002', rate, '0.2')) }],
    );
    assert.deepEqual(byId['d-gpt-image']?.price_usd, { input_per_1m: 5, output_per_1m: 40 });
    assert.deepEqual(
      [
        (byId['d-gpt-image']?.price as Record<string, number>)['input_per_1m'],
        (byId['d-gpt-image']?.price as Record<string, number>)['output_per_1m'],
      ],
      [num(credits('5', rate, '0.2')), num(credits('40', rate, '0.2'))],
    );
    assert.deepEqual([byId['c-image']?.margin, byId['c-image']?.price_usd], [null, null]);
    const text = await runSvc(['price', 'list'], env);
    assert.equal(text.code, 0, text.stderr);
    const line = text.stdout.split('\n').find((l) => l.startsWith('d-stt ')) ?? '';
    assert.match(line, new RegExp(`${credits('0.006', rate, '0.3')} per minute .*per_minute=0\\.006 +0\\.3`));

    // The user's Prices page: each unit price in toman, and the dollar price behind it.
    const user = await createConsoleUser(b, { name: 'M', email: 'm@example.com', balance: 0n, keyName: 'k' });
    const c = consoleClient(b.baseUrl);
    await c.signIn(user.email, user.password);
    const body = (await c.get('/prices')).body;
    const cell = (id: string): string =>
      (new RegExp(`data-testid="prices-${id}">([\\s\\S]*?)</td>`).exec(body)?.[1] ?? assert.fail(`${id} on the page`))
        .replace(/\s+/g, ' ')
        .replace(/\s*>\s*/g, '>')
        .replace(/\s*<\s*/g, '<');
    const toman = (n: bigint): string => Number(n).toLocaleString('en-US');
    assert.match(
      cell('d-image'),
      new RegExp(
        `${toman(credits('0.167', rate, '0.2'))} toman<span class="hint">per image, 1024×1024 high · from \\$0.167`,
      ),
    );
    assert.match(
      cell('d-stt'),
      new RegExp(`${toman(credits('0.006', rate, '0.3'))} toman<span class="hint">per minute of audio · from \\$0.006`),
    );
    assert.match(
      cell('d-tts'),
      new RegExp(`${toman(credits('15', rate, '0.2'))} toman<span class="hint">per 1M characters · from \\$15`),
    );
    assert.match(
      cell('d-rerank'),
      new RegExp(
        `${toman(credits('0.002', rate, '0.2'))} toman<span class="hint">per search \\(up to 100 documents\\) · from \\$0.002`,
      ),
    );
    assert.match(cell('c-image'), /400 toman<span class="hint">per image, 1024×1024 low<\/span>/);

    // The account's own margin replaces the model's for its media calls too, on the page and at admission.
    const margin = await runSvc(['account', 'update', '--account', user.accountId, '--margin', '0'], env);
    assert.equal(margin.code, 0, margin.stderr);
    const again = (await c.get('/prices')).body;
    assert.match(again, new RegExp(`${toman(credits('0.006', rate, '0'))} toman`));
    const own = await a.createFundedKey(100_000);
    const setOwn = await runSvc(['account', 'update', '--account', own.accountId, '--margin', '0'], env);
    assert.equal(setOwn.code, 0, setOwn.stderr);
    assert.equal(
      (await post(a, own.key, '/rerank', { model: 'd-rerank', query: 'q', documents: ['one'] })).cost,
      credits('0.002', rate, '0'),
    );
  });
});
