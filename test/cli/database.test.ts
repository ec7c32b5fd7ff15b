import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadEnv } from '../../core/config/env';
import { SVC_BIN } from '../helpers/processes';
import { runSvc, type SvcRun } from './run-svc';

const CHECKOUT = path.resolve(__dirname, '..', '..');

/** `svc ARGS` as a real process started in `cwd`, with SVC_DATABASE_URL unset unless `env` sets it. */
function svcIn(cwd: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<SvcRun> {
  const base: NodeJS.ProcessEnv = { ...process.env, SVC_FROM_SOURCE: '1' };
  delete base['SVC_DATABASE_URL'];
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [SVC_BIN, ...args],
      { cwd, env: { ...base, ...env } },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') reject(error);
        else resolve({ code: child.exitCode, stdout, stderr });
      },
    );
  });
}

describe('one database, found the same way from any folder', function () {
  this.timeout(120_000);
  let dir: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-db-'));
  });

  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("defaults to data/svc.db in svc's own folder, not in the current one", () => {
    const before = process.cwd();
    try {
      process.chdir(dir);
      const env = loadEnv({});
      assert.equal(env.databaseUrl, `sqlite:${path.join(CHECKOUT, 'data', 'svc.db')}`);
      assert.equal(env.databaseFrom, 'default');
      assert.equal(loadEnv({ SVC_DATABASE_URL: 'sqlite:x.db' }).databaseFrom, 'SVC_DATABASE_URL');
    } finally {
      process.chdir(before);
    }
  });

  it('a command run from another folder looks in the checkout and leaves no data/ folder behind', async () => {
    const run = await svcIn(dir, ['wallet', 'show', '--account', 'acc_notthereatall']);
    assert.equal(run.code, 1);
    // Either the checkout has no database yet, or it has one without this account: both name it.
    assert.ok(run.stderr.includes(path.join(CHECKOUT, 'data', 'svc.db')), run.stderr);
    assert.match(run.stderr, /SVC_DATABASE_URL/);
    assert.deepEqual(fs.readdirSync(dir), [], 'nothing was created in the current folder');
  });

  it('read-only and account commands refuse a database that is not there, naming it, and create nothing', async () => {
    const file = path.join(dir, 'nested', 'svc.db');
    const env = { SVC_DATABASE_URL: `sqlite:${file}` };
    for (const args of [
      ['wallet', 'show', '--account', 'acc_x'],
      ['wallet', 'ledger', '--account', 'acc_x'],
      ['wallet', 'topup', '--account', 'acc_x', '--amount', '5'],
      ['key', 'list', '--account', 'acc_x'],
      ['key', 'create', '--account', 'acc_x'],
      ['key', 'revoke', 'key_x'],
      ['account', 'list'],
      ['usage', '--account', 'acc_x'],
    ]) {
      const run = await runSvc(args, env);
      assert.equal(run.code, 1, `svc ${args.join(' ')}: ${run.stderr}`);
      assert.ok(run.stderr.startsWith(`svc: no database at ${file}\n`), `svc ${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /this is the file SVC_DATABASE_URL names/);
      assert.match(run.stderr, /Create it with ".*svc migrate"/);
      assert.match(run.stderr, /SVC_DATABASE_URL=sqlite:\/path\/to\/svc\.db/);
      assert.doesNotMatch(run.stderr, /npx svc/);
      assert.equal(fs.existsSync(path.dirname(file)), false, `svc ${args.join(' ')} created ${path.dirname(file)}`);
    }
    // Creating an account is how a database starts; after that, an unknown id names the database.
    const made = await runSvc(['account', 'create', '--name', 'first', '--json'], env);
    assert.equal(made.code, 0, made.stderr);
    assert.ok(fs.existsSync(file));
    const unknown = await runSvc(['wallet', 'show', '--account', 'acc_notthere'], env);
    assert.equal(unknown.code, 1);
    assert.match(
      unknown.stderr,
      new RegExp(`No account "acc_notthere" in the database sqlite:${file.replace(/[.]/g, '\\.')}`),
    );
    assert.match(unknown.stderr, /set SVC_DATABASE_URL to use another/);
  });
});
