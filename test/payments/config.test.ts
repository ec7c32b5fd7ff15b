import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../core/config/load';
import { runSvc } from '../cli/run-svc';

const parse = (text: string, env: NodeJS.ProcessEnv = {}) => parseConfig(text, env, 'test.yaml');

// SPEC §12's example, block style.
const SPEC = `
payments:
  public_url: https://svc.example.com
  min_toman: 10000
  max_toman: 50000000
  gateways:
    zarinpal:
      merchant_id: \${ZARINPAL_MERCHANT_ID}
      base_url: https://payment.zarinpal.com
    zibal:
      merchant: \${ZIBAL_MERCHANT}
      base_url: https://gateway.zibal.ir
console:
  signup: open
`;

describe('config payments: and console:', () => {
  it('reads SPEC §12 example, merchants from the environment', () => {
    const config = parse(SPEC, {
      ZARINPAL_MERCHANT_ID: '1344b5d4-0048-11e8-94db-005056a205be',
      ZIBAL_MERCHANT: 'zibal',
    });
    const payments = config.payments;
    assert.ok(payments);
    assert.equal(payments.publicUrl, 'https://svc.example.com');
    assert.equal(payments.minToman, 10_000n);
    assert.equal(payments.maxToman, 50_000_000n);
    assert.equal(payments.expireMinutes, 60);
    assert.deepEqual([...payments.gateways.keys()], ['zarinpal', 'zibal']);
    assert.equal(payments.gateways.get('zarinpal')?.merchant, '1344b5d4-0048-11e8-94db-005056a205be');
    assert.equal(payments.gateways.get('zibal')?.baseUrl, 'https://gateway.zibal.ir');
    assert.deepEqual(config.console, { signup: 'open' });
  });

  it('has no payments and closed sign-up without the sections', () => {
    const config = parse('limits: { requests_per_minute: 10 }');
    assert.equal(config.payments, undefined);
    assert.equal(config.console, undefined);
  });

  it('refuses a gateway without its merchant, naming the key', () => {
    assert.throws(
      () =>
        parse(
          'payments:\n  public_url: https://svc.example.com\n  gateways:\n    zibal:\n      base_url: https://gateway.zibal.ir\n',
        ),
      /^(Config)?Error: config payments\.gateways\.zibal\.merchant: is required/,
    );
    assert.throws(
      () => parse('payments:\n  public_url: https://svc.example.com\n  gateways:\n    zarinpal: {}\n'),
      /^(Config)?Error: config payments\.gateways\.zarinpal\.merchant_id: is required/,
    );
  });

  it('refuses an empty merchant from the environment without showing it', () => {
    assert.throws(
      () =>
        parse('payments:\n  public_url: https://svc.example.com\n  gateways:\n    zibal:\n      merchant: ${Z}\n', {
          Z: ' ',
        }),
      /config payments\.gateways\.zibal\.merchant: is empty \(check the environment variable it names\)/,
    );
  });

  it('refuses a ZarinPal merchant that is not a UUID, bounds out of order, no gateway, no public_url, an unknown gateway', () => {
    const base = 'payments:\n  public_url: https://svc.example.com\n';
    assert.throws(
      () => parse(`${base}  gateways:\n    zarinpal:\n      merchant_id: abc\n`),
      /zarinpal\.merchant_id: must be the 36-character/,
    );
    assert.throws(
      () => parse(`${base}  min_toman: 5000\n  max_toman: 1000\n  gateways:\n    zibal:\n      merchant: zibal\n`),
      /config payments\.max_toman: must be at least min_toman/,
    );
    assert.throws(() => parse(base), /config payments\.gateways: must configure at least one gateway/);
    assert.throws(
      () => parse('payments:\n  gateways:\n    zibal:\n      merchant: zibal\n'),
      /config payments\.public_url: is required/,
    );
    assert.throws(
      () => parse(`${base}  gateways:\n    idpay:\n      merchant: x\n`),
      /config payments\.gateways\.idpay: unknown gateway/,
    );
    assert.throws(() => parse('console:\n  signup: maybe\n'), /config console\.signup: unknown signup "maybe"/);
  });
});

describe('svc config check with payments', function () {
  it('says which gateways, their callback URLs and sign-up, never the merchants', async function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-pay-config-'));
    try {
      const file = path.join(dir, 'svc.yaml');
      fs.writeFileSync(file, SPEC);
      const env = { ZARINPAL_MERCHANT_ID: '1344b5d4-0048-11e8-94db-005056a205be', ZIBAL_MERCHANT: 'secret-merchant' };
      const json = await runSvc(['config', 'check', '--file', file, '--json'], env);
      assert.equal(json.code, 0, json.stderr);
      const parsed = JSON.parse(json.stdout) as {
        payments: { gateways: { name: string; callback_url: string }[] };
        console: unknown;
      };
      assert.deepEqual(
        parsed.payments.gateways.map((g) => g.callback_url),
        [
          'https://svc.example.com/console/payments/zarinpal/return',
          'https://svc.example.com/console/payments/zibal/return',
        ],
      );
      assert.deepEqual(parsed.console, { signup: 'open' });
      const text = await runSvc(['config', 'check', '--file', file], env);
      assert.match(text.stdout, /payments: zarinpal, zibal, 10000-50000000 toman/);
      assert.match(text.stdout, /sign-up: open/);
      for (const out of [json.stdout, text.stdout]) {
        assert.doesNotMatch(out, /secret-merchant/);
        assert.doesNotMatch(out, /1344b5d4/);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
