import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const CHECKOUT = path.resolve(__dirname, '..', '..');

/*
 * bin/svc.js, the `./svc` launcher, in a checkout of its own: a build (dist/) and sources (cli/)
 * that say which one ran. A build older than any source (a `git pull` without `npm ci`) must not
 * run: the launcher says so and runs the sources.
 */
describe('the svc launcher never runs a stale build', function () {
  this.timeout(60_000);
  let root: string;

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-launcher-'));
    fs.mkdirSync(path.join(root, 'bin'));
    fs.copyFileSync(path.join(CHECKOUT, 'bin', 'svc.js'), path.join(root, 'bin', 'svc.js'));
    fs.symlinkSync(path.join(CHECKOUT, 'node_modules'), path.join(root, 'node_modules'));
    fs.mkdirSync(path.join(root, 'dist', 'cli'), { recursive: true });
    fs.writeFileSync(
      path.join(root, 'dist', 'cli', 'entry.js'),
      "exports.main = async () => { process.stdout.write('ran the build\\n'); };\n",
    );
    fs.mkdirSync(path.join(root, 'cli'));
    fs.mkdirSync(path.join(root, 'core'));
    fs.writeFileSync(
      path.join(root, 'cli', 'entry.ts'),
      "export async function main(): Promise<void> { process.stdout.write('ran the sources\\n'); }\n",
    );
    fs.writeFileSync(path.join(root, 'core', 'thing.ts'), 'export const x = 1;\n');
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const run = (): { stdout: string; stderr: string } => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env['SVC_FROM_SOURCE'];
    const child = spawnSync(process.execPath, [path.join(root, 'bin', 'svc.js')], { env, encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    return { stdout: child.stdout, stderr: child.stderr };
  };
  const setTimes = (file: string, secondsAgo: number): void => {
    const t = new Date(Date.now() - secondsAgo * 1000);
    fs.utimesSync(path.join(root, file), t, t);
  };

  it('runs the build when it is newer than every source', () => {
    setTimes('cli/entry.ts', 120);
    setTimes('core/thing.ts', 120);
    setTimes('dist/cli/entry.js', 10);
    const out = run();
    assert.equal(out.stdout, 'ran the build\n');
    assert.equal(out.stderr, '');
  });

  it('runs the sources, and says why, when a source changed after the build', () => {
    setTimes('dist/cli/entry.js', 120);
    setTimes('core/thing.ts', 10);
    const out = run();
    assert.equal(out.stdout, 'ran the sources\n');
    assert.match(out.stderr, /build in dist\/ is older than the sources.*npm run build/);
  });
});
