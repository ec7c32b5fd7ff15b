#!/usr/bin/env node
'use strict';
// Runs the compiled CLI (npm ci builds it through the prepare script). In a checkout whose
// build is missing or older than its sources (a `git pull` without `npm ci`), runs the
// TypeScript sources through tsx instead, so the command never runs stale code.
const path = require('node:path');
const fs = require('node:fs');
const root = path.join(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli', 'entry.js');

/** The newest modification time of a .ts source under the folders the build compiles. */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.isDirectory()) {
        if (e.name !== 'node_modules') walk(path.join(dir, e.name));
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
        const t = fs.statSync(path.join(dir, e.name)).mtimeMs;
        if (t > newest) newest = t;
      }
    }
  };
  for (const dir of ['cli', 'core', 'adapters', 'gen']) walk(path.join(root, dir));
  return newest;
}

// SVC_FROM_SOURCE=1 forces the sources (the tests use it so that a stale build cannot hide a change).
let entry;
let useBuild = fs.existsSync(compiled) && process.env.SVC_FROM_SOURCE !== '1';
if (useBuild && fs.statSync(compiled).mtimeMs < newestSource()) {
  useBuild = false;
  process.stderr.write(
    'svc: the build in dist/ is older than the sources (a git pull without npm ci?); running the sources. ' +
      '`npm run build` makes the build current and the start faster.\n',
  );
}
if (useBuild) {
  entry = require(compiled);
} else {
  require('tsx/cjs');
  entry = require(path.join(root, 'cli', 'entry.ts'));
}
entry.main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`svc: ${error && error.message ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
