import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { startSvc, type TestSvc } from '../helpers/harness';
import { SVC_BIN } from '../helpers/processes';
import { consoleClient } from './helpers';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `svc ARGS` with `input` piped to its standard input. */
function runWithInput(args: readonly string[], env: NodeJS.ProcessEnv, input: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_BIN, ...args], {
      env: { ...process.env, SVC_FROM_SOURCE: '1', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('svc account create --email --password-stdin', function () {
  this.timeout(120_000);
  let database: TestDatabase;
  let svc: TestSvc | undefined;

  before(async function () {
    database = await createTestDatabase();
  });

  after(async function () {
    await svc?.close();
    await database?.drop();
  });

  it('creates an account whose owner can sign in to the console with that password', async function () {
    const env = { SVC_DATABASE_URL: database.url };
    const run = await runWithInput(
      ['account', 'create', '--name', 'کافه نمونه', '--email', 'Cafe@Example.com', '--password-stdin', '--json'],
      env,
      'a piped password\n',
    );
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.match(String(out['id']), /^acc_/);
    assert.equal(out['email'], 'cafe@example.com');
    assert.equal(out['name'], 'کافه نمونه');
    assert.equal(run.stdout.includes('a piped password'), false);

    svc = await startSvc({ databaseUrl: database.url });
    const c = consoleClient(svc.baseUrl);
    assert.equal((await c.signIn('cafe@example.com', 'a piped password')).status, 303);
    assert.match((await c.get('/account')).body, /کافه نمونه/);
  });

  it('refuses --email without --password-stdin, an empty password, a short one, and a taken email', async function () {
    const env = { SVC_DATABASE_URL: database.url };
    const noStdin = await runWithInput(['account', 'create', '--name', 'X', '--email', 'x@example.com'], env, '');
    assert.equal(noStdin.code, 2);
    assert.match(noStdin.stderr, /--email needs --password-stdin/);
    const empty = await runWithInput(
      ['account', 'create', '--name', 'X', '--email', 'x@example.com', '--password-stdin'],
      env,
      '',
    );
    assert.equal(empty.code, 2);
    assert.match(empty.stderr, /standard input was empty/);
    const short = await runWithInput(
      ['account', 'create', '--name', 'X', '--email', 'x@example.com', '--password-stdin'],
      env,
      'short\n',
    );
    assert.notEqual(short.code, 0);
    assert.match(short.stderr, /at least 10 characters/);
    const taken = await runWithInput(
      ['account', 'create', '--name', 'Y', '--email', 'cafe@example.com', '--password-stdin'],
      env,
      'another password\n',
    );
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, /already exists/);
  });
});

describe('svc account set-sign-in and svc account list (the account that holds the keys and the credit)', function () {
  this.timeout(120_000);
  let database: TestDatabase;
  let svc: TestSvc | undefined;

  before(async function () {
    database = await createTestDatabase();
  });

  after(async function () {
    await svc?.close();
    await database?.drop();
  });

  it('gives an existing account a sign-in whose console shows its key and its balance, and lists it', async function () {
    const env = { SVC_DATABASE_URL: database.url };
    const json = (run: Run): Record<string, unknown> => {
      assert.equal(run.code, 0, run.stderr);
      return JSON.parse(run.stdout) as Record<string, unknown>;
    };
    // The README's path: an account, a key and credit first; a sign-in for that same account later.
    const account = json(await runWithInput(['account', 'create', '--name', 'Ada', '--json'], env, ''));
    const id = String(account['id']);
    const key = json(await runWithInput(['key', 'create', '--account', id, '--name', 'laptop', '--json'], env, ''));
    json(await runWithInput(['wallet', 'topup', '--account', id, '--amount', '12345', '--json'], env, ''));
    const set = json(
      await runWithInput(
        ['account', 'set-sign-in', '--account', id, '--email', 'Ada@Example.com', '--password-stdin', '--json'],
        env,
        'ada password one\n',
      ),
    );
    assert.deepEqual(
      { id: set['id'], email: set['email'], replaced: set['replaced'] },
      { id, email: 'ada@example.com', replaced: false },
    );

    const listed = json(await runWithInput(['account', 'list', '--json'], env, ''));
    const accounts = listed['accounts'] as Record<string, unknown>[];
    assert.equal(accounts.length, 1, 'no second account was made');
    assert.deepEqual(Object.keys(accounts[0] ?? {}), ['id', 'name', 'email', 'balance', 'created_at']);
    assert.deepEqual(
      { ...accounts[0], created_at: undefined },
      { id, name: 'Ada', email: 'ada@example.com', balance: 12345, created_at: undefined },
    );
    const human = await runWithInput(['account', 'list'], env, '');
    assert.match(human.stdout, new RegExp(`${id}\\s+Ada\\s+ada@example.com\\s+12345`));

    svc = await startSvc({ databaseUrl: database.url });
    const c = consoleClient(svc.baseUrl);
    assert.equal((await c.signIn('ada@example.com', 'ada password one')).status, 303);
    const keys = await c.get('/keys');
    assert.ok(keys.body.includes(String(key['id'])), 'the key made before the sign-in is on the console');
    assert.match((await c.get('/wallet')).body, /12,345/);

    // Set again: the old password stops working and the browser signed in with it is signed out.
    const again = json(
      await runWithInput(
        ['account', 'set-sign-in', '--account', id, '--email', 'ada@example.com', '--password-stdin', '--json'],
        env,
        'ada password two\n',
      ),
    );
    assert.equal(again['replaced'], true);
    assert.equal((await c.get('/keys')).status, 303, 'the old session ended');
    const fresh = consoleClient(svc.baseUrl);
    assert.notEqual((await fresh.signIn('ada@example.com', 'ada password one')).status, 303);
    assert.equal((await fresh.signIn('ada@example.com', 'ada password two')).status, 303);
  });

  it('refuses an unknown account, an email another account signs in with, and a password on the command line', async function () {
    const env = { SVC_DATABASE_URL: database.url };
    const unknown = await runWithInput(
      ['account', 'set-sign-in', '--account', 'acc_nope', '--email', 'n@example.com', '--password-stdin'],
      env,
      'long enough password\n',
    );
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no such account/);
    const other = await runWithInput(['account', 'create', '--name', 'Other', '--json'], env, '');
    const otherId = String((JSON.parse(other.stdout) as Record<string, unknown>)['id']);
    const taken = await runWithInput(
      ['account', 'set-sign-in', '--account', otherId, '--email', 'ada@example.com', '--password-stdin'],
      env,
      'long enough password\n',
    );
    assert.equal(taken.code, 1);
    assert.match(taken.stderr, /already exists/);
    const noStdin = await runWithInput(
      ['account', 'set-sign-in', '--account', otherId, '--email', 'o@example.com'],
      env,
      '',
    );
    assert.equal(noStdin.code, 2);
    assert.match(noStdin.stderr, /--password-stdin is required/);
    const listed = JSON.parse((await runWithInput(['account', 'list', '--json'], env, '')).stdout) as {
      accounts: { id: string; email: string | null }[];
    };
    assert.equal(listed.accounts.find((a) => a.id === otherId)?.email, null, 'nothing was set on a refusal');
  });
});
