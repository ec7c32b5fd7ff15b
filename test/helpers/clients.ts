import { existsSync } from 'node:fs';
import path from 'node:path';

/*
 * The real clients the tests run (Codex, Claude Code, Gemini CLI, the MCP Inspector) live in their
 * own package, test/clients, with exact versions and its own lock. `npm test` installs it first
 * (scripts/test-clients.mjs, the pretest script) and .ci/run installs it as a step of its own; the
 * server's `npm ci` does not.
 */

/** test/clients: the package that holds the real clients. */
export const CLIENTS_DIR = path.resolve(__dirname, '..', 'clients');

/** A client's executable in test/clients/node_modules/.bin, unless `override` (an SVC_*_BIN variable) names one. */
export function clientBin(name: string, override?: string): string {
  return override !== undefined && override !== '' ? override : path.join(CLIENTS_DIR, 'node_modules', '.bin', name);
}

/** A file inside an installed client package, e.g. the Inspector's CLI script. */
export function clientFile(relative: string): string {
  return path.join(CLIENTS_DIR, 'node_modules', relative);
}

/**
 * Skips the calling suite when the client `file` is not installed, with a note that says how to
 * install it; under CI (CI=true) a missing client is an error instead, so a broken install can
 * never pass as a skipped test.
 */
export function requireClient(ctx: Mocha.Context, file: string, what: string, variable?: string): void {
  if (existsSync(file)) return;
  const how = `run \`node scripts/test-clients.mjs\` (npm test does it first)${variable === undefined ? '' : ` or set ${variable}`}`;
  if (process.env['CI'] === 'true' || process.env['CI'] === '1') {
    throw new Error(`no ${what} at ${file}: ${how}; under CI a missing test client fails`);
  }
  process.stderr.write(`    note: no ${what} at ${file} (${how}): skipped\n`);
  ctx.skip();
}
