import fs from 'node:fs';

/** Debian's Chromium, which the browser tests drive through playwright-core. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Skips the calling suite (with the reason) when Chromium is not installed, except in CI, where
 * the browser tests must run (`.ci/run` installs it): there it fails instead. The same rule as
 * `requireMysql`: a newcomer's `npm test` on a machine without Chromium reports these suites as
 * pending, never as failures that are not the code's.
 */
export function requireChromium(ctx: Mocha.Context): void {
  if (fs.existsSync(CHROMIUM)) return;
  if (process.env['CI'] === 'true')
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)`);
  process.stdout.write(`      (skipped: ${CHROMIUM} is missing; apt-get install -y chromium to run the browser tests)\n`);
  ctx.skip();
}
