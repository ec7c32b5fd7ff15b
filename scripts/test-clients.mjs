#!/usr/bin/env node
// Installs the real clients the tests run (test/clients: Codex, Claude Code, Gemini CLI, the MCP
// Inspector, and openai 7 / @google/genai 3 with the Node 22 they need) with
// `npm ci --prefix test/clients`, but only when test/clients/node_modules is missing or was
// installed from another package-lock.json. `npm test` runs it first (pretest) and
// .ci/run runs it as its own step, so the server's own `npm ci` never downloads these clients.
//   node scripts/test-clients.mjs           install when missing or stale, else say it is current
//   node scripts/test-clients.mjs --force   install even when current
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test', 'clients');
const lockFile = path.join(dir, 'package-lock.json');
const modules = path.join(dir, 'node_modules');
// Written after a successful install: the hash of the lock it installed.
const stamp = path.join(modules, '.svc-installed-lock');

const lockHash = createHash('sha256').update(fs.readFileSync(lockFile)).digest('hex');
const installed = fs.existsSync(stamp) ? fs.readFileSync(stamp, 'utf8').trim() : undefined;

if (!process.argv.includes('--force') && installed === lockHash) {
  console.log('test clients: test/clients/node_modules matches its package-lock.json (nothing to install)');
  process.exit(0);
}

const why = !fs.existsSync(modules)
  ? 'test/clients/node_modules is missing'
  : installed === undefined
    ? 'test/clients/node_modules has no record of its install'
    : installed === lockHash
      ? '--force'
      : 'test/clients/package-lock.json changed since the last install';
console.log(`test clients: ${why}; running npm ci --prefix test/clients (Codex, Claude Code, Gemini CLI, Qwen Code, the MCP Inspector, openai 7, @google/genai 3, Node 22; a minute or two) ...`);
const started = Date.now();
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const result = spawnSync(npm, ['ci', '--prefix', dir, '--no-audit', '--no-fund'], { stdio: 'inherit' });
const seconds = ((Date.now() - started) / 1000).toFixed(0);
if (result.status !== 0) {
  console.error(`test clients: npm ci --prefix test/clients failed after ${seconds} s (exit ${result.status ?? result.signal})`);
  process.exit(1);
}
fs.writeFileSync(stamp, `${lockHash}\n`);
console.log(`test clients: installed in ${seconds} s`);
