import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { openStore } from '../../core/store/db';
import { migrations } from '../../core/store/migrations';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';
import { runSvc, runSvcProcess, svcJson } from './run-svc';

/** Every byte the database holds: the SQLite file and its WAL, or every row of every MySQL table. */
async function databaseContents(db: TestDatabase): Promise<string> {
  if (db.file !== undefined) {
    const dir = path.dirname(db.file);
    return fs
      .readdirSync(dir)
      .map((name) => fs.readFileSync(path.join(dir, name)).toString('latin1'))
      .join('\n');
  }
  const store = openStore(db.url, { poolSize: 1 });
  try {
    const tables = [
      'accounts',
      'api_keys',
      'wallets',
      'ledger_entries',
      'holds',
      'usage_records',
      'stored_responses',
      'idempotency_records',
    ] as const;
    const rows = await Promise.all(tables.map((t) => store.db.selectFrom(t).selectAll().execute()));
    return JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  } finally {
    await store.close();
  }
}

for (const dialect of ['sqlite', 'mysql'] as const) {
  describe(`svc admin commands (${dialect})`, function () {
    this.timeout(120_000);
    let db: TestDatabase;
    let env: NodeJS.ProcessEnv;

    before(async function () {
      if (dialect === 'mysql') requireMysql(this);
      db = await createTestDatabase(dialect);
      env = { SVC_DATABASE_URL: db.url };
    });

    after(async () => {
      await db?.drop();
    });

    it('migrates, then reports nothing left to apply', async () => {
      assert.deepEqual((await svcJson(['migrate'], env))['applied'], Object.keys(migrations));
      assert.deepEqual(await svcJson(['migrate'], env), {
        database: db.url.replace(/\/\/([^:/@]+):([^@]*)@/, '//$1:***@'),
        applied: [],
      });
    });

    it('runs as a real process too: bin/svc.js prints the same, exits with its status and leaves nothing open', async () => {
      // The other cases call the CLI's run() in process; these spawn it, so a handle left open
      // (the process would never exit) or an exit status lost on the way out still fails here.
      const created = await runSvcProcess(['account', 'create', '--name', 'spawned', '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      const account = JSON.parse(created.stdout) as { id: string };
      const shown = await runSvcProcess(['wallet', 'show', '--account', account.id, '--json'], env);
      assert.equal(shown.code, 0, shown.stderr);
      assert.equal((JSON.parse(shown.stdout) as { balance: unknown })['balance'], 0);
      const bad = await runSvcProcess(['wallet', 'topup', '--account', account.id, '--amount', 'lots'], env);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /^svc: /);
    });

    it('round-trips account, key, wallet and ledger through --json, showing the full key only once', async () => {
      const account = await svcJson(['account', 'create', '--name', 'Acme Co'], env);
      assert.match(String(account['id']), /^acc_[0-9A-Za-z]{16}$/);
      assert.equal(account['name'], 'Acme Co');
      const accountId = String(account['id']);

      const created = await svcJson(['key', 'create', '--account', accountId, '--name', 'ci'], env);
      assert.match(String(created['id']), /^key_/);
      assert.equal(created['name'], 'ci');
      const fullKey = String(created['key']);
      assert.match(fullKey, /^svc_sk_[0-9A-Za-z]{38,}$/);

      const topup = await runSvc(
        ['wallet', 'topup', '--account', accountId, '--amount', '1000', '--reference', 'invoice 7', '--json'],
        env,
      );
      assert.equal(topup.code, 0, topup.stderr);
      // Money is a JSON integer in the text itself, not a string and not a float.
      assert.match(topup.stdout, /"balance":1000,"held":0,"currency":"toman"/);
      const topupJson = JSON.parse(topup.stdout) as { entry: Record<string, unknown> };
      assert.equal(topupJson.entry['amount'], 1000);
      assert.equal(topupJson.entry['kind'], 'topup');
      assert.equal(topupJson.entry['reference'], 'invoice 7');

      await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '250'], env);
      assert.deepEqual(await svcJson(['wallet', 'show', '--account', accountId], env), {
        account_id: accountId,
        balance: 1250,
        held: 0,
        currency: 'toman',
      });

      const ledger = await svcJson(['wallet', 'ledger', '--account', accountId], env);
      const entries = ledger['entries'] as Array<Record<string, unknown>>;
      assert.deepEqual(
        entries.map((e) => [e['kind'], e['amount'], e['balance_after'], e['reference']]),
        [
          ['topup', 250, 1250, ''],
          ['topup', 1000, 1000, 'invoice 7'],
        ],
      );
      for (const e of entries) assert.notEqual(e['request_id'], '');
      const newest = await svcJson(['wallet', 'ledger', '--account', accountId, '--limit', '1'], env);
      assert.equal((newest['entries'] as unknown[]).length, 1);

      const listRun = await runSvc(['key', 'list', '--account', accountId, '--json'], env);
      assert.equal(listRun.code, 0, listRun.stderr);
      assert.ok(!listRun.stdout.includes(fullKey), 'key list must not print the full key');
      const keys = (JSON.parse(listRun.stdout) as { keys: Array<Record<string, unknown>> }).keys;
      assert.equal(keys.length, 1);
      assert.equal(keys[0]?.['id'], created['id']);
      assert.equal(keys[0]?.['prefix'], fullKey.slice(0, String(keys[0]?.['prefix']).length));
      assert.ok(String(keys[0]?.['prefix']).startsWith('svc_sk_'));
      assert.equal(keys[0]?.['last_four'], fullKey.slice(-4));
      assert.equal(keys[0]?.['revoked_at'], null);
      const human = await runSvc(['key', 'list', '--account', accountId], env);
      assert.ok(!human.stdout.includes(fullKey));
      assert.ok(human.stdout.includes(fullKey.slice(-4)));

      const revoked = await svcJson(['key', 'revoke', String(created['id'])], env);
      assert.equal(revoked['id'], created['id']);
      assert.match(String(revoked['revoked_at']), /^\d{4}-\d\d-\d\dT/);
      const after = await svcJson(['key', 'list', '--account', accountId], env);
      assert.equal((after['keys'] as Array<Record<string, unknown>>)[0]?.['revoked_at'], revoked['revoked_at']);

      const stored = await databaseContents(db);
      assert.ok(!stored.includes(fullKey), 'the database must not hold the full key');
      assert.ok(!stored.includes(fullKey.slice(7)), 'the database must not hold the key body');
      assert.ok(
        stored.includes(createHash('sha256').update(fullKey).digest('hex')),
        'the database holds the SHA-256 of the key',
      );
    });

    it('prints short human tables without --json', async () => {
      const account = await svcJson(['account', 'create', '--name', 'Tables'], env);
      const accountId = String(account['id']);
      await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '460'], env);
      const show = await runSvc(['wallet', 'show', '--account', accountId], env);
      assert.equal(show.code, 0, show.stderr);
      assert.match(show.stdout, /^account\s+acc_\w+$/m);
      assert.match(show.stdout, /^balance\s+460$/m);
      assert.match(show.stdout, /^currency\s+toman$/m);
      const ledger = await runSvc(['wallet', 'ledger', '--account', accountId], env);
      assert.match(ledger.stdout, /^ID\s+KIND\s+AMOUNT/m);
      assert.match(ledger.stdout, /^le_\d+\s+topup\s+\+460\s+460\s/m);
      const created = await runSvc(['key', 'create', '--account', accountId], env);
      assert.match(created.stdout, /^key\s+svc_sk_\w+$/m);
      assert.match(created.stderr, /only time the full key is shown/);
    });

    it("sets and resets a key's own limit of calls in flight (--concurrent N|default)", async () => {
      const account = await svcJson(['account', 'create', '--name', 'Busy'], env);
      const accountId = String(account['id']);
      const created = await svcJson(['key', 'create', '--account', accountId, '--concurrent', '5'], env);
      assert.equal(created['concurrent_limit'], 5);
      const keyId = String(created['id']);
      const none = await svcJson(['key', 'update', keyId, '--concurrent', '0'], env);
      assert.equal(none['concurrent_limit'], 0);
      const reset = await svcJson(['key', 'update', keyId, '--concurrent', 'default'], env);
      assert.equal(reset['concurrent_limit'], null);
      const bad = await runSvc(['key', 'update', keyId, '--concurrent', '-1', '--json'], env);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--concurrent must be a whole number of calls \(0: no limit\) or default/);
    });

    it('refuses bad input with exit status 2 or 1, a clear message on stderr, and no change', async () => {
      const account = await svcJson(['account', 'create', '--name', 'Careful'], env);
      const accountId = String(account['id']);
      await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '100'], env);

      const cases: Array<[string[], number, RegExp]> = [
        [
          ['wallet', 'topup', '--account', accountId, '--amount', '-5'],
          2,
          /--amount must be a whole number of credits \(toman\), e\.g\. 1000 \(got "-5"\)/,
        ],
        [
          ['wallet', 'topup', '--account', accountId, '--amount', '1.5'],
          2,
          /--amount must be a whole number of credits.*\(got "1\.5"\)/,
        ],
        [
          ['wallet', 'topup', '--account', accountId, '--amount', 'abc'],
          2,
          /--amount must be a whole number of credits.*\(got "abc"\)/,
        ],
        [['wallet', 'topup', '--account', accountId, '--amount', '0'], 2, /--amount must be more than 0/],
        [['wallet', 'topup', '--account', accountId, '--amount', '1e3'], 2, /--amount must be a whole number/],
        [['wallet', 'topup', '--account', accountId, '--amount', '99999999999999999999'], 1, /amount must be at most/],
        [['wallet', 'topup', '--account', accountId], 2, /missing --amount CREDITS/],
        [['wallet', 'topup', '--account', '--amount', '5'], 2, /--account needs a value/],
        [['wallet', 'topup', '--account', 'acc_doesnotexist00', '--amount', '5'], 1, /No account "acc_doesnotexist00"/],
        [['wallet', 'show', '--account', 'acc_doesnotexist00'], 1, /No account "acc_doesnotexist00"/],
        [['wallet', 'ledger', '--account', 'acc_doesnotexist00'], 1, /No account "acc_doesnotexist00"/],
        [
          ['wallet', 'ledger', '--account', accountId, '--limit', '0'],
          2,
          /--limit must be a whole number from 1 to 1000 \(got "0"\)/,
        ],
        [
          ['wallet', 'ledger', '--account', accountId, '--limit', 'ten'],
          2,
          /--limit must be a whole number from 1 to 1000/,
        ],
        [['key', 'create', '--account', 'acc_doesnotexist00'], 1, /No account "acc_doesnotexist00"/],
        [['key', 'list', '--account', 'acc_doesnotexist00'], 1, /No account "acc_doesnotexist00"/],
        [['key', 'revoke', 'key_doesnotexist00'], 1, /No API key "key_doesnotexist00"/],
        [['key', 'revoke'], 2, /missing KEY_ID/],
        [['key', 'revoke', 'a', 'b'], 2, /unexpected argument "b"/],
        [['account', 'create', '--name', '   '], 1, /name must not be empty/],
        [['account', 'create', '--name', 'x', '--name', 'y'], 2, /--name is given more than once/],
        [['account', 'create', '--name', 'x', '--json=yes'], 2, /--json takes no value/],
        [['wallet', 'show', '--account', accountId, '--verbose'], 2, /unknown option --verbose for "svc wallet show"/],
        [['wallet', 'burn'], 2, /unknown command "wallet burn" \(see: \.\/svc wallet --help\)/],
        [['frobnicate'], 2, /unknown command "frobnicate" \(see: \.\/svc --help\)/],
      ];
      for (const [args, code, message] of cases) {
        const run = await runSvc([...args, '--json'], env);
        assert.equal(run.code, code, `svc ${args.join(' ')}: exit ${String(run.code)}, stderr ${run.stderr}`);
        assert.match(run.stderr, /^svc: /, `svc ${args.join(' ')}`);
        assert.match(run.stderr, message, `svc ${args.join(' ')}`);
        assert.equal(run.stdout, '', `svc ${args.join(' ')} printed on stdout`);
      }
      const ledger = await svcJson(['wallet', 'ledger', '--account', accountId], env);
      assert.equal((ledger['entries'] as unknown[]).length, 1, 'a refused command must not touch the ledger');
      assert.equal((await svcJson(['wallet', 'show', '--account', accountId], env))['balance'], 100);
    });
  });
}

describe('svc command line', function () {
  this.timeout(60_000);

  it('prints help on stdout with status 0, and usage on stderr with status 2 when no command is given', async () => {
    const help = await runSvc(['--help'], {});
    assert.equal(help.code, 0);
    for (const command of [
      'serve',
      'core',
      'gateway',
      'migrate',
      'account create',
      'key create',
      'key list',
      'key revoke',
      'wallet topup',
      'wallet show',
      'wallet ledger',
    ]) {
      assert.match(help.stdout, new RegExp(`^  ${command} `, 'm'), command);
    }
    const none = await runSvc([], {});
    assert.equal(none.code, 2);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /^Usage: svc COMMAND/);

    const topup = await runSvc(['wallet', 'topup', '--help'], {});
    assert.equal(topup.code, 0);
    assert.match(
      topup.stdout,
      /^Usage: svc wallet topup --account ID --amount CREDITS \[--reference TEXT\] \[--json\]$/m,
    );
    assert.deepEqual(await runSvc(['help', 'wallet', 'topup'], {}), topup);
    const gateway = await runSvc(['gateway', '--help'], {});
    assert.equal(gateway.code, 0);
    assert.match(gateway.stdout, /--core HOST:PORT/);
    const group = await runSvc(['key'], {});
    assert.equal(group.code, 2);
    assert.match(group.stderr, /svc key revoke KEY_ID/);
  });

  it('names a bad SVC_DATABASE_URL without echoing its password', async () => {
    const run = await runSvc(['wallet', 'show', '--account', 'acc_x'], {
      SVC_DATABASE_URL: 'postgres://u:hunter2@db/svc',
    });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^svc: SVC_DATABASE_URL must start with sqlite: or mysql:\/\//);
    assert.ok(!run.stderr.includes('hunter2'));
  });

  it('refuses mistyped server commands before starting anything, and exits', async () => {
    const gateway = await runSvc(['gateway', '--core', 'not-an-address'], {});
    assert.equal(gateway.code, 2);
    assert.match(gateway.stderr, /^svc: --core must be HOST:PORT or unix:PATH/);
    const serve = await runSvc(['serve', '--port', '1'], {});
    assert.equal(serve.code, 2);
    assert.match(serve.stderr, /unknown option --port for "svc serve"/);
  });
});
