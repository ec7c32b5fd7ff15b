#!/usr/bin/env node
// Adds package-lock.json entries for optional platform binaries (other OS/CPU builds of
// @bufbuild/buf, unrs-resolver, and napi-rs builds such as Qwen Code's @teddyzhu/clipboard) that the registry reachable here does not serve. `npm install`
// leaves them out of the lock when it cannot fetch them, and `npm ci` then refuses the lock
// ("Missing: @bufbuild/buf-darwin-arm64@ from lock file"). The entries carry os/cpu/libc, so npm
// skips them on other platforms without fetching anything. Run it after `npm install`, then
// `npm install --package-lock-only --ignore-scripts` to put the file back in npm's order.
import fs from 'node:fs';

const file = process.argv[2] ?? 'package-lock.json';
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const packages = lock.packages;
const CPU = { arm64: 'arm64', aarch64: 'arm64', x64: 'x64', armv7: 'arm', arm: 'arm', ia32: 'ia32', loong64: 'loong64', ppc64: 'ppc64', riscv64: 'riscv64', s390x: 's390x' };
// `<package>-<os>-<cpu>[-<abi>]`, as @bufbuild/buf, unrs-resolver and napi-rs packages name their builds.
const NAME = /^(@[^/]+\/.+?)-(darwin|linux|win32|freebsd|android|openbsd|sunos)-([a-z0-9]+)(?:-([a-z]+))?$/;

const added = [];
for (const [location, entry] of Object.entries(packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    if (packages[`node_modules/${name}`] !== undefined || packages[`${location}/node_modules/${name}`] !== undefined) continue;
    const match = NAME.exec(name);
    const cpu = match === null ? undefined : CPU[match[3]];
    if (match === null || cpu === undefined) {
      console.error(`cannot tell the platform of ${name} (optional dependency of ${location || 'the root'}); add its lock entry by hand`);
      process.exit(1);
    }
    const [, , os, , abi] = match;
    packages[`node_modules/${name}`] = {
      version,
      cpu: [cpu],
      ...(entry.dev === true ? { dev: true } : {}),
      ...(os === 'linux' && abi !== undefined ? { libc: [abi.startsWith('musl') ? 'musl' : 'glibc'] } : {}),
      license: entry.license ?? 'MIT',
      optional: true,
      os: [os],
    };
    added.push(name);
  }
}
fs.writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length === 0 ? 'lock file complete' : `added ${added.length} entries: ${added.join(', ')}`);
