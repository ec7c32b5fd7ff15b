import assert from 'node:assert/strict';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { runSvc, svcJson } from '../cli/run-svc';
import { migrate, openStore } from '../../core/store/db';
import { createAuthenticator } from '../../core/auth/authenticator';
import { oauthAccessTokens } from '../../core/oauth/principal';
import pino from 'pino';

describe('svc key create/roll/list: scope, expiry, roll', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let accountId: string;

  before(async function () {
    db = await createTestDatabase();
    env = { SVC_DATABASE_URL: db.url };
    accountId = (await svcJson(['account', 'create', '--name', 'cli keys'], env))['id'] as string;
  });

  after(async () => {
    await db?.drop();
  });

  async function authenticates(key: string, at: number): Promise<boolean> {
    const store = openStore(db.url, { poolSize: 1 });
    try {
      await migrate(store);
      const auth = createAuthenticator({
        store,
        accessTokens: oauthAccessTokens(store),
        logger: pino({ level: 'silent' }),
        now: () => at,
      });
      return await auth.authenticate(key).then(
        () => true,
        () => false,
      );
    } finally {
      await store.close();
    }
  }

  it('creates a key with a scope and an expiry; key list shows them', async () => {
    const expires = new Date(Date.now() + 3 * 86_400_000);
    expires.setUTCMilliseconds(0);
    const created = await svcJson(
      [
        'key',
        'create',
        '--account',
        accountId,
        '--name',
        'ci',
        '--scope',
        'tools',
        '--expires',
        expires.toISOString().replace('.000Z', 'Z'),
      ],
      env,
    );
    assert.equal(created['scope'], 'tools');
    assert.equal(created['expires_at'], expires.toISOString());
    const listed = (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[];
    const key = listed.find((k) => k['id'] === created['id']);
    assert.equal(key?.['scope'], 'tools');
    assert.equal(key?.['expires_at'], created['expires_at']);
    assert.equal(key?.['lineage_id'], created['id']);

    const human = await runSvc(['key', 'list', '--account', accountId], env);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /SCOPE/);
    assert.match(human.stdout, /EXPIRES/);
    const row = human.stdout.split('\n').find((line) => line.includes(created['id'] as string)) ?? '';
    assert.match(row, /tools/);
    assert.match(row, /active/);
    assert.ok(!human.stdout.includes(created['key'] as string), 'the full key is never listed');
    assert.ok(await authenticates(created['key'] as string, Date.now()));
    assert.ok(!(await authenticates(created['key'] as string, expires.getTime() + 1)));
  });

  it('rolls a key: same label and scope, the old one stops after the grace', async () => {
    const created = await svcJson(
      ['key', 'create', '--account', accountId, '--name', 'deploy', '--scope', 'chat'],
      env,
    );
    const rolled = await svcJson(['key', 'roll', created['id'] as string, '--grace', '2h'], env);
    assert.notEqual(rolled['id'], created['id']);
    assert.equal(rolled['name'], 'deploy');
    assert.equal(rolled['scope'], 'chat');
    assert.equal(rolled['lineage_id'], created['id']);
    const previous = rolled['previous'] as Record<string, unknown>;
    assert.equal(previous['replaced_by'], rolled['id']);
    const graceEnd = Date.parse(previous['expires_at'] as string);
    assert.ok(Math.abs(graceEnd - (Date.now() + 2 * 3_600_000)) < 120_000, String(previous['expires_at']));
    assert.ok(await authenticates(created['key'] as string, graceEnd - 1000));
    assert.ok(!(await authenticates(created['key'] as string, graceEnd)));
    assert.ok(await authenticates(rolled['key'] as string, graceEnd + 1000));

    const human = await runSvc(['key', 'list', '--account', accountId], env);
    const row = human.stdout.split('\n').find((line) => line.startsWith(created['id'] as string)) ?? '';
    assert.match(row, new RegExp(`rolled to ${rolled['id'] as string}`));
  });

  it('refuses bad input naming the flag, with a non-zero exit and nothing created', async () => {
    const before = ((await svcJson(['key', 'list', '--account', accountId], env))['keys'] as unknown[]).length;
    const some = (
      (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[]
    )[0]?.['id'] as string;
    const cases: [string[], RegExp][] = [
      [['key', 'create', '--account', accountId, '--scope', 'admin'], /--scope must be one of all, chat, tools/],
      [
        ['key', 'create', '--account', accountId, '--expires', '2001-01-01T00:00:00Z'],
        /--expires must be in the future/,
      ],
      [['key', 'create', '--account', accountId, '--expires', 'tomorrow'], /--expires must be an ISO-8601 date-time/],
      [
        ['key', 'create', '--account', accountId, '--expires', '2030-02-30T00:00:00'],
        /--expires must be an ISO-8601 date-time/,
      ],
      [['key', 'roll', some, '--grace', '31d'], /--grace must be at most 30 days/],
      [['key', 'roll', some, '--grace', '24'], /--grace must be 0 or a whole number of s, m, h or d/],
      [['key', 'roll', some, '--grace', '-1h'], /--grace must be 0 or a whole number/],
      [['key', 'roll', 'key_doesnotexist'], /No API key/],
    ];
    for (const [args, message] of cases) {
      const run = await runSvc(args, env);
      assert.notEqual(run.code, 0, `svc ${args.join(' ')} succeeded`);
      assert.match(run.stderr, message, `svc ${args.join(' ')}`);
      assert.equal(run.stdout, '');
    }
    const after = (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[];
    assert.equal(after.length, before);
    // The refused rolls left the key as it was.
    assert.equal(after.find((k) => k['id'] === some)?.['replaced_by'], null);
  });
});

describe('svc key create/caps/list: spend caps', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let accountId: string;

  before(async function () {
    db = await createTestDatabase();
    env = { SVC_DATABASE_URL: db.url };
    accountId = (await svcJson(['account', 'create', '--name', 'cli caps'], env))['id'] as string;
  });

  after(async () => {
    await db?.drop();
  });

  it('creates a key with caps, changes and removes them, and lists caps and spend', async () => {
    const created = await svcJson(
      ['key', 'create', '--account', accountId, '--cap-daily', '500', '--cap-monthly', '9000'],
      env,
    );
    assert.equal(created['cap_daily'], 500);
    assert.equal(created['cap_monthly'], 9000);
    const id = created['id'] as string;
    const changed = await svcJson(['key', 'caps', id, '--daily', 'none', '--monthly', '0'], env);
    assert.deepEqual([changed['cap_daily'], changed['cap_monthly'], changed['spent_today']], [null, 0, 0]);
    const rolled = await svcJson(['key', 'roll', id, '--grace', '0'], env);
    assert.deepEqual([rolled['cap_daily'], rolled['cap_monthly']], [null, 0]);
    const listed = (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[];
    const shown = listed.find((k) => k['id'] === rolled['id']);
    assert.deepEqual([shown?.['cap_monthly'], shown?.['spent_this_month']], [0, 0]);
    const human = await runSvc(['key', 'list', '--account', accountId], env);
    assert.match(human.stdout, /TODAY/);
    const row = human.stdout.split('\n').find((line) => line.startsWith(rolled['id'] as string)) ?? '';
    assert.match(row, /0 \(no cap\)/);
    assert.match(row, /0\/0/);
  });

  it('refuses bad caps naming the flag, and changes nothing', async () => {
    const some = (await svcJson(['key', 'create', '--account', accountId, '--cap-daily', '7'], env))['id'] as string;
    const before = ((await svcJson(['key', 'list', '--account', accountId], env))['keys'] as unknown[]).length;
    const cases: [string[], RegExp][] = [
      [['key', 'create', '--account', accountId, '--cap-daily=-5'], /--cap-daily must be a whole number of credits/],
      [['key', 'create', '--account', accountId, '--cap-daily', '1.5'], /--cap-daily must be a whole number/],
      [['key', 'create', '--account', accountId, '--cap-monthly', 'ten'], /--cap-monthly must be a whole number/],
      [['key', 'create', '--account', accountId, '--cap-monthly', '1e3'], /--cap-monthly must be a whole number/],
      [['key', 'caps', some, '--daily', 'lots'], /--daily must be a whole number of credits \(0 or more\) or none/],
      [['key', 'caps', some, '--monthly=-1'], /--monthly must be a whole number/],
      [['key', 'caps', some], /give --daily N\|none, --monthly N\|none, --total N\|none or several/],
      [['key', 'caps', 'key_doesnotexist', '--daily', '5'], /No API key/],
    ];
    for (const [args, message] of cases) {
      const run = await runSvc(args, env);
      assert.notEqual(run.code, 0, `svc ${args.join(' ')} succeeded`);
      assert.match(run.stderr, message, `svc ${args.join(' ')}`);
      assert.equal(run.stdout, '');
    }
    const after = (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[];
    assert.equal(after.length, before);
    assert.equal(after.find((k) => k['id'] === some)?.['cap_daily'], 7);
    // `none` on a new key means no cap, as leaving the flag out does.
    const uncapped = await svcJson(['key', 'create', '--account', accountId, '--cap-monthly', 'none'], env);
    assert.equal(uncapped['cap_monthly'], null);
  });
});

describe('svc key create/update: total cap, allowed models and tools', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let accountId: string;

  before(async function () {
    db = await createTestDatabase();
    env = { SVC_DATABASE_URL: db.url };
    accountId = (await svcJson(['account', 'create', '--name', 'cli limits'], env))['id'] as string;
  });

  after(async () => {
    await db?.drop();
  });

  it('creates a key with a total cap and allowed lists, changes them, and a roll keeps them', async () => {
    const created = await svcJson(
      ['key', 'create', '--account', accountId, '--cap-total', '9000', '--models', 'svc-pro', '--tools', 'web_search'],
      env,
    );
    assert.deepEqual(
      [created['cap_total'], created['allowed_models'], created['allowed_tools']],
      [9000, ['svc-pro'], ['web_search']],
    );
    const id = created['id'] as string;
    const updated = await svcJson(
      ['key', 'update', id, '--models', 'svc-pro,svc-embed', '--tools', 'all', '--cap-total', '0'],
      env,
    );
    assert.deepEqual(
      [updated['cap_total'], updated['spent_total'], updated['allowed_models'], updated['allowed_tools']],
      [0, 0, ['svc-pro', 'svc-embed'], null],
    );
    const capped = await svcJson(['key', 'caps', id, '--total', 'none'], env);
    assert.equal(capped['cap_total'], null);
    const rolled = await svcJson(['key', 'roll', id, '--grace', '0'], env);
    assert.deepEqual(rolled['allowed_models'], ['svc-pro', 'svc-embed']);
    const human = await runSvc(['key', 'update', rolled['id'] as string, '--tools', 'maps_search_places'], env);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /tools\s+maps_search_places/);
  });

  it('refuses unknown models and tools and a negative total cap, changing nothing', async () => {
    const some = await svcJson(['key', 'create', '--account', accountId, '--models', 'svc-pro'], env);
    const id = some['id'] as string;
    const before = ((await svcJson(['key', 'list', '--account', accountId], env))['keys'] as unknown[]).length;
    const cases: [string[], RegExp][] = [
      [['key', 'create', '--account', accountId, '--models', 'gpt-9'], /unknown model "gpt-9"; the models are svc-pro/],
      [['key', 'create', '--account', accountId, '--tools', 'rm_rf'], /unknown tool "rm_rf"; the tools are web_search/],
      [['key', 'create', '--account', accountId, '--cap-total=-1'], /--cap-total must be a whole number/],
      [['key', 'update', id, '--models', 'svc-embed,nope'], /unknown model "nope"/],
      [['key', 'update', id, '--models', ','], /--models needs names/],
      [['key', 'update', id, '--cap-total', 'x'], /--cap-total must be a whole number/],
      [['key', 'update', id], /give --name, --expires, --models, --tools, --cap-total or --concurrent/],
    ];
    for (const [args, message] of cases) {
      const run = await runSvc(args, env);
      assert.notEqual(run.code, 0, `svc ${args.join(' ')} succeeded`);
      assert.match(run.stderr, message, `svc ${args.join(' ')}`);
      assert.equal(run.stdout, '');
    }
    const after = (await svcJson(['key', 'list', '--account', accountId], env))['keys'] as Record<string, unknown>[];
    assert.equal(after.length, before);
    assert.deepEqual(after.find((k) => k['id'] === id)?.['allowed_models'], ['svc-pro']);
  });
});
