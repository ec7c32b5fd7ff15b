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
