import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { runSvc, runSvcProcess } from './run-svc';

const VERSION = (
  JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;

/** A plain TCP listener holding `port`, as another program would. */
function occupy(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('svc start-up: version, per-command environment, summary, ports in use', function () {
  this.timeout(120_000);
  let dir: string;
  const running: SvcProcess[] = [];

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-startup-'));
  });

  after(async () => {
    for (const proc of running.reverse()) await proc.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('svc --version prints the version of package.json', async () => {
    for (const flag of ['--version', '-V']) {
      const run = await runSvc([flag], {});
      assert.equal(run.code, 0);
      assert.equal(run.stdout, `svc ${VERSION}\n`);
    }
  });

  it('svc COMMAND --help lists the environment variables that command reads', async () => {
    const serve = await runSvc(['serve', '--help'], {});
    assert.equal(serve.code, 0);
    const env = serve.stdout.split('\nEnvironment:\n')[1] ?? '';
    for (const name of [
      'SVC_DATABASE_URL',
      'SVC_HTTP_ADDR',
      'SVC_GRPC_ADDR',
      'SVC_CONFIG',
      'SVC_ADMIN_TOKEN',
      'SVC_LOG_FORMAT',
    ])
      assert.match(env, new RegExp(`^  ${name} +\\S`, 'm'), name);
    const show = await runSvc(['wallet', 'show', '--help'], {});
    const showEnv = show.stdout.split('\nEnvironment:\n')[1] ?? '';
    assert.match(showEnv, /^ {2}SVC_DATABASE_URL +.*svc's own folder/m);
    assert.doesNotMatch(showEnv, /SVC_HTTP_ADDR/);
    const gateway = await runSvc(['gateway', '--help'], {});
    assert.match(gateway.stdout.split('\nEnvironment:\n')[1] ?? '', /^ {2}SVC_CORE_ADDR /m);
  });

  it('logs JSON by default off a terminal, with every endpoint and the database in the ready line', async () => {
    const port = await freePort();
    const env = {
      SVC_DATABASE_URL: `sqlite:${path.join(dir, 'json.db')}`,
      SVC_HTTP_ADDR: `127.0.0.1:${port}`,
      SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
    };
    const proc = await spawnSvc(['serve'], env, '"msg":"svc is ready"');
    running.push(proc);
    const line = proc
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"svc is ready"'));
    const ready = JSON.parse(line ?? '{}') as Record<string, unknown>;
    const base = `http://127.0.0.1:${port}`;
    assert.equal(ready['openai'], `${base}/v1/openai`);
    assert.equal(ready['anthropic'], `${base}/v1/anthropic`);
    assert.equal(ready['gemini'], `${base}/v1/gemini`);
    assert.equal(ready['mcp'], `${base}/v1/mcp`);
    assert.equal(ready['console'], `${base}/console/`);
    assert.equal(ready['database'], env.SVC_DATABASE_URL);
    assert.ok((ready['sandbox'] as string[]).includes('svc-pro'));
    assert.equal(await proc.stop(), 0);
  });

  it('SVC_LOG_FORMAT=text prints a summary for a person: every URL, the database, the sandbox warning', async () => {
    const port = await freePort();
    const grpc = `127.0.0.1:${await freePort()}`;
    const db = path.join(dir, 'text.db');
    const proc = await spawnSvc(
      ['serve'],
      {
        SVC_DATABASE_URL: `sqlite:${db}`,
        SVC_HTTP_ADDR: `127.0.0.1:${port}`,
        SVC_GRPC_ADDR: grpc,
        SVC_LOG_FORMAT: 'text',
      },
      /Next: .*svc account create/,
    );
    running.push(proc);
    const out = proc.output();
    const base = `http://127.0.0.1:${port}`;
    for (const [label, value] of [
      ['OpenAI API', `${base}/v1/openai`],
      ['Anthropic API', `${base}/v1/anthropic`],
      ['Gemini API', `${base}/v1/gemini`],
      ['MCP tools', `${base}/v1/mcp`],
      ['Console', `${base}/console/`],
      ['Database', `sqlite:${db}`],
      ['gRPC core', grpc],
    ])
      assert.match(out, new RegExp(`^ {2}${label} +${(value ?? '').replace(/[.?*+^$()[\]\\/]/g, '\\$&')}`, 'm'), label);
    assert.match(out, /SANDBOX: svc-pro/);
    assert.match(out, /no operator sign-in \(SVC_ADMIN_TOKEN is not set\)/);
    assert.doesNotMatch(out, /npx svc/);
    assert.doesNotMatch(out, /^\{"level"/m, 'no JSON lines in text mode');
    assert.equal(await proc.stop(), 0);
  });

  it('a port in use names the variable to change: SVC_HTTP_ADDR, SVC_GRPC_ADDR', async () => {
    const httpPort = await freePort();
    const grpcPort = await freePort();
    const held = await occupy(httpPort);
    try {
      const run = await runSvcProcess(['serve'], {
        SVC_DATABASE_URL: `sqlite:${path.join(dir, 'ports.db')}`,
        SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
        SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
      });
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(
          `svc: 127\\.0\\.0\\.1:${httpPort} is already in use .*set SVC_HTTP_ADDR to a free address, e\\.g\\. SVC_HTTP_ADDR=127\\.0\\.0\\.1:\\d+`,
        ),
      );
    } finally {
      held.close();
    }
    const heldGrpc = await occupy(grpcPort);
    try {
      const run = await runSvcProcess(['serve'], {
        SVC_DATABASE_URL: `sqlite:${path.join(dir, 'ports.db')}`,
        SVC_HTTP_ADDR: `127.0.0.1:${await freePort()}`,
        SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
      });
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(`svc: 127\\.0\\.0\\.1:${grpcPort} is already in use .*set SVC_GRPC_ADDR to a free address`),
      );
    } finally {
      heldGrpc.close();
    }
  });
});
