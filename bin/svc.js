#!/usr/bin/env node
'use strict';
// Runs the compiled CLI (npm ci builds it through the prepare script). In a checkout whose
// build is missing, falls back to running the TypeScript sources through tsx.
const path = require('node:path');
const fs = require('node:fs');
const compiled = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
if (fs.existsSync(compiled)) {
  require(compiled).main(process.argv.slice(2));
} else {
  require('tsx/cjs');
  require(path.join(__dirname, '..', 'cli', 'main.ts')).main(process.argv.slice(2));
}
