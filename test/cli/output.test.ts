import assert from 'node:assert/strict';
import { UsageError, parseCommandArgs, parseCount, parseCredits } from '../../cli/args';
import { table, toJson } from '../../cli/output';

describe('CLI output', () => {
  it('prints bigint money as exact JSON integers, even past 2^53', () => {
    const text = toJson({ balance: 12345678901234567890n, held: 0n, list: [1n, -2n], name: 'a"b', none: null });
    assert.equal(text, '{"balance":12345678901234567890,"held":0,"list":[1,-2],"name":"a\\"b","none":null}');
    assert.deepEqual(JSON.parse(toJson({ n: 42n, s: 'x', b: true })), { n: 42, s: 'x', b: true });
  });

  it('renders a table with a header and (none) when empty', () => {
    assert.equal(
      table(
        ['id', 'amount'],
        [
          ['le_1', 1000n],
          ['le_22', null],
        ],
      ),
      'ID     AMOUNT\nle_1   1000\nle_22  -',
    );
    assert.equal(table(['id'], []), 'ID\n(none)');
  });
});

describe('CLI arguments', () => {
  const options = {
    account: { type: 'string', placeholder: 'ID', required: true, description: '' },
    json: { type: 'boolean', description: '' },
  } as const;

  it('parses options, flags and positionals', () => {
    const args = parseCommandArgs('key revoke', ['key_1', '--account=acc_1', '--json'], options, ['KEY_ID']);
    assert.deepEqual([...args.strings], [['account', 'acc_1']]);
    assert.deepEqual([...args.flags], ['json']);
    assert.deepEqual(args.positionals, ['key_1']);
    assert.equal(args.help, false);
  });

  it('takes a value that starts with one dash as a value, so the amount check can name it', () => {
    assert.equal(parseCommandArgs('x', ['--account', '-5'], options, []).strings.get('account'), '-5');
  });

  it('does not require options when --help is asked for', () => {
    assert.equal(parseCommandArgs('x', ['-h'], options, ['KEY_ID']).help, true);
  });

  const refused: Array<[string[], RegExp]> = [
    [['--account'], /--account needs a value: --account ID/],
    [['--account', '--json'], /--account needs a value/],
    [['--account', 'a', '--account', 'b'], /--account is given more than once/],
    [['--account', 'a', '--json=true'], /--json takes no value/],
    [['--account', 'a', '-x'], /unknown option -x for "svc x"/],
    [['--json'], /missing --account ID/],
  ];
  for (const [argv, message] of refused) {
    it(`refuses ${argv.join(' ')}`, () => {
      assert.throws(
        () => parseCommandArgs('x', argv, options, []),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
      );
    });
  }

  it('accepts only whole positive credits', () => {
    assert.equal(parseCredits('--amount', '1000'), 1000n);
    assert.equal(parseCredits('--amount', '123456789012345678901'), 123456789012345678901n);
    for (const bad of ['-5', '1.5', 'abc', '0', '1e3', '', '0x10', '+5', '1,000']) {
      assert.throws(() => parseCredits('--amount', bad), UsageError, bad);
    }
    assert.equal(parseCount('--limit', '1000', 1000), 1000);
    assert.throws(() => parseCount('--limit', '1001', 1000), /from 1 to 1000/);
  });
});
