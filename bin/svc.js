#!/usr/bin/env node
'use strict';
// Runs the compiled CLI (npm ci builds it through the prepare script). In a checkout whose
// build is missing, falls back to running the TypeScript sources through tsx.
const path = require('node:path');
const fs = require('node:fs');
const compiled = path.join(__dirname, '..', 'dist', 'cli', 'entry.js');
// SVC_FROM_SOURCE=1 forces the sources (the tests use it so that a stale build cannot hide a change).
let entry;
if (fs.existsSync(compiled) && process.env.SVC_FROM_SOURCE !== '1') {
  entry = require(compiled);
} else {
  require('tsx/cjs');
  entry = require(path.join(__dirname, '..', 'cli', 'entry.ts'));
}
entry.main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`svc: ${error && error.message ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
