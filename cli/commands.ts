import fs from 'node:fs';
import path from 'node:path';
import type * as Admin from './admin';
import type * as ConfigCheck from './config-check';
import type { OptionSpec } from './args';
import type { CommandContext } from './context';
import type * as Servers from './servers';
import type * as Payments from './payments';
import type * as Price from './price';
import type * as Usage from './usage';

export interface Command {
  /** As typed after `svc`, e.g. `wallet topup`. */
  readonly name: string;
  readonly summary: string;
  readonly options: Readonly<Record<string, OptionSpec>>;
  readonly positionals: readonly string[];
  /** The environment variables it reads (`svc COMMAND --help` lists them). */
  readonly env?: readonly EnvName[];
  run(ctx: CommandContext): Promise<void>;
}

/** Every variable svc reads (SPEC §4), as `--help` describes it. */
const ENV_HELP = {
  SVC_DATABASE_URL:
    "sqlite:PATH or mysql://USER:PASS@HOST:PORT/DB (default: data/svc.db in svc's own folder, whichever folder you run svc from)",
  SVC_HTTP_ADDR: 'where the HTTP adapters listen (default 127.0.0.1:8080)',
  SVC_GRPC_ADDR: 'where the core listens (default 127.0.0.1:50051, unix:PATH allowed)',
  SVC_CORE_ADDR: 'the core svc gateway calls (default SVC_GRPC_ADDR)',
  SVC_CONFIG: 'the YAML configuration file (default: built-in sandbox providers); ${NAME} in it reads NAME',
  SVC_ADMIN_TOKEN: 'bearer token for admin RPCs and the console operator sign-in (default: none, both off)',
  SVC_LOG_LEVEL: 'fatal, error, warn, info (default), debug, trace or silent',
  SVC_LOG_FORMAT: 'json (one JSON object a line) or text (a start-up summary and short lines; default on a terminal)',
  SVC_METRICS_ADDR: 'serve GET /metrics here, no credential (the HTTP server needs the admin token)',
  SVC_PUBLIC_URL: "where clients reach svc (https://svc.example.com): the OAuth issuer (default: each request's Host)",
  SVC_ALLOWED_ORIGINS: 'browser origins allowed to call the MCP server besides localhost (comma-separated, * for any)',
  SVC_REDIS_URL: 'redis://… : rate limits shared by every core on it (default: per process)',
  SVC_SERVE_TRANSPORT: "in-process (default) or grpc: how svc serve's adapters reach its core",
  SVC_CORE_TUNNELS: "tunnels a gateway keeps to its cores, each carrying many calls (default 0: a gRPC call per call)",
  SVC_FAST_PATH: "0: translate every OpenAI chat chunk; 1: pass them through (default: the file's chat.fast_path, on)",
  SVC_CORE_THREAD: '1: svc serve runs the core in a worker thread (a second CPU core)',
  SVC_WORKERS: 'svc serve processes on the one HTTP port (default: one per usable CPU with SVC_REDIS_URL, else 1)',
  'OTEL_*': 'standard OpenTelemetry variables, e.g. OTEL_EXPORTER_OTLP_ENDPOINT to export traces',
} as const;

type EnvName = keyof typeof ENV_HELP;

const SERVER_ENV: readonly EnvName[] = [
  'SVC_CONFIG',
  'SVC_ADMIN_TOKEN',
  'SVC_LOG_LEVEL',
  'SVC_LOG_FORMAT',
  'SVC_METRICS_ADDR',
];
const ADMIN_ENV: readonly EnvName[] = ['SVC_DATABASE_URL', 'SVC_CONFIG'];

const json: OptionSpec = { type: 'boolean', description: 'print exactly one JSON object on stdout' };
const account: OptionSpec = {
  type: 'string',
  placeholder: 'ID',
  required: true,
  description: 'the account id (acc_…)',
};

// Modules are loaded only when their command runs: the server commands must initialise
// OpenTelemetry before gRPC, HTTP and the database drivers are first required, and the admin
// commands should not pay for the server stack. `require`, not `import()`: under tsx's CommonJS
// hook a dynamic import goes to Node's ESM loader, which cannot load .ts sources.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const admin = (): typeof Admin => require('./admin') as typeof Admin;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const payments = (): typeof Payments => require('./payments') as typeof Payments;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const price = (): typeof Price => require('./price') as typeof Price;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const servers = (): typeof Servers => require('./servers') as typeof Servers;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const configCheck = (): typeof ConfigCheck => require('./config-check') as typeof ConfigCheck;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const usage = (): typeof Usage => require('./usage') as typeof Usage;

/** Every command of SPEC §3, in the order `svc --help` lists them. */
export const COMMANDS: readonly Command[] = [
  {
    name: 'serve',
    summary: 'run the core and the HTTP adapters (migrates the database first)',
    options: {
      workers: {
        type: 'string',
        placeholder: 'N',
        description:
          'processes serving the one HTTP port (default: SVC_WORKERS, else one per usable CPU when SVC_REDIS_URL shares the rate limits, else 1)',
      },
    },
    positionals: [],
    env: [
      'SVC_DATABASE_URL',
      'SVC_HTTP_ADDR',
      'SVC_GRPC_ADDR',
      ...SERVER_ENV,
      'SVC_PUBLIC_URL',
      'SVC_ALLOWED_ORIGINS',
      'SVC_REDIS_URL',
      'SVC_SERVE_TRANSPORT',
      'SVC_CORE_TUNNELS',
      'SVC_FAST_PATH',
      'SVC_CORE_THREAD',
      'SVC_WORKERS',
      'OTEL_*',
    ],
    run: async (ctx) => servers().serve(ctx),
  },
  {
    name: 'core',
    summary: 'run the gRPC core only',
    options: {},
    positionals: [],
    env: ['SVC_DATABASE_URL', 'SVC_GRPC_ADDR', ...SERVER_ENV, 'SVC_REDIS_URL', 'SVC_FAST_PATH', 'OTEL_*'],
    run: async (ctx) => servers().core(ctx),
  },
  {
    name: 'gateway',
    summary: 'run the HTTP adapters only, calling a running core',
    options: {
      core: { type: 'string', placeholder: 'HOST:PORT', description: 'the core to call (default: SVC_CORE_ADDR)' },
    },
    positionals: [],
    env: [
      'SVC_HTTP_ADDR',
      'SVC_CORE_ADDR',
      'SVC_CORE_TUNNELS',
      ...SERVER_ENV,
      'SVC_PUBLIC_URL',
      'SVC_ALLOWED_ORIGINS',
      'OTEL_*',
    ],
    run: async (ctx) => servers().gateway(ctx),
  },
  {
    name: 'migrate',
    summary: 'apply database migrations, then exit',
    options: { json },
    positionals: [],
    env: ['SVC_DATABASE_URL'],
    run: async (ctx) => admin().migrateCommand(ctx),
  },
  {
    name: 'config check',
    summary: 'validate the configuration file as svc serve would at start, and say what it configures',
    options: {
      file: {
        type: 'string',
        placeholder: 'PATH',
        description: 'the file to check (default: SVC_CONFIG; none: the built-in configuration)',
      },
      json,
    },
    positionals: [],
    env: ['SVC_CONFIG'],
    run: async (ctx) => configCheck().configCheck(ctx),
  },
  {
    name: 'account create',
    summary: 'create an account and its empty wallet',
    options: {
      name: { type: 'string', placeholder: 'NAME', required: true, description: 'the account name' },
      email: {
        type: 'string',
        placeholder: 'EMAIL',
        description: 'the console sign-in email (needs --password-stdin)',
      },
      'password-stdin': { type: 'boolean', description: 'read the console password from standard input' },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().accountCreate(ctx),
  },
  {
    name: 'account list',
    summary: 'list every account, newest first: id, name, console sign-in email, balance, created',
    options: { json },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().accountList(ctx),
  },
  {
    name: 'account set-sign-in',
    summary:
      'give an existing account (the one with the keys and the credit) a console sign-in, or replace the one it has',
    options: {
      account,
      email: { type: 'string', placeholder: 'EMAIL', required: true, description: 'the console sign-in email' },
      'password-stdin': {
        type: 'boolean',
        description: 'read the console password (10-200 characters) from standard input (required)',
      },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().accountSetSignIn(ctx),
  },
  {
    name: 'key create',
    summary: 'create an API key and print it in full, once',
    options: {
      account,
      name: { type: 'string', placeholder: 'LABEL', description: 'a label for the key' },
      scope: {
        type: 'string',
        placeholder: 'chat|tools|all[,manage]',
        description:
          'what the key may call: chat (OpenAI API), tools (MCP) or all (default); ",manage" also lets it manage the account\'s keys over the API',
      },
      expires: {
        type: 'string',
        placeholder: 'ISO-8601',
        description: 'when the key stops working, e.g. 2026-12-31T23:59:59Z (default: never)',
      },
      'cap-daily': {
        type: 'string',
        placeholder: 'N|none',
        description: 'credits the key (and keys rolled from it) may spend per UTC day (default, or none: no cap)',
      },
      'cap-monthly': {
        type: 'string',
        placeholder: 'N|none',
        description: 'credits the key (and keys rolled from it) may spend per UTC month (default, or none: no cap)',
      },
      'cap-total': {
        type: 'string',
        placeholder: 'N|none',
        description: 'credits the key (and keys rolled from it) may ever spend (default, or none: no cap)',
      },
      models: {
        type: 'string',
        placeholder: 'A,B|all',
        description: 'the models (ids or aliases) the key may use (default, or all: every model)',
      },
      tools: {
        type: 'string',
        placeholder: 'X,Y|all',
        description: 'the MCP tools (and hosted web_search) the key may use (default, or all: every tool)',
      },
      concurrent: {
        type: 'string',
        placeholder: 'N|default',
        description: "the key's own limit of calls in flight (0: none; default: limits.concurrent_per_key)",
      },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyCreate(ctx),
  },
  {
    name: 'key update',
    summary:
      "change a key's label, expiry, allowed models and tools, total cap or limit of calls in flight; a bad value changes nothing",
    options: {
      name: { type: 'string', placeholder: 'LABEL', description: 'a new label' },
      expires: {
        type: 'string',
        placeholder: 'ISO-8601|never',
        description: 'when the key stops working (a time in the future), or never',
      },
      models: {
        type: 'string',
        placeholder: 'A,B|all',
        description: 'the models (ids or aliases) the key may use, or all',
      },
      tools: { type: 'string', placeholder: 'X,Y|all', description: 'the tools the key may use, or all' },
      'cap-total': {
        type: 'string',
        placeholder: 'N|none',
        description: 'credits the key (and keys rolled from it) may ever spend, or none to remove the cap',
      },
      concurrent: {
        type: 'string',
        placeholder: 'N|default',
        description: "the key's own limit of calls in flight (0: none), or default: limits.concurrent_per_key",
      },
      json,
    },
    positionals: ['KEY_ID'],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyUpdate(ctx),
  },
  {
    name: 'key caps',
    summary: "set or remove a key's spend caps (shared with the keys rolled from or to it); spend so far is kept",
    options: {
      daily: { type: 'string', placeholder: 'N|none', description: 'credits per UTC day, or none to remove the cap' },
      monthly: {
        type: 'string',
        placeholder: 'N|none',
        description: 'credits per UTC month, or none to remove the cap',
      },
      total: { type: 'string', placeholder: 'N|none', description: 'credits ever, or none to remove the cap' },
      json,
    },
    positionals: ['KEY_ID'],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyCaps(ctx),
  },
  {
    name: 'key roll',
    summary: 'issue a new key with the same label, scope, expiry and caps; the old one works until the grace ends',
    options: {
      grace: {
        type: 'string',
        placeholder: 'DURATION',
        description: 'how long the old key keeps working: 0, 90m, 24h (default), 7d; at most 30d',
      },
      json,
    },
    positionals: ['KEY_ID'],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyRoll(ctx),
  },
  {
    name: 'key list',
    summary:
      "list an account's keys: id, label, prefix/last four, scope, caps, spend today and this month, last used, expires, status",
    options: { account, json },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyList(ctx),
  },
  {
    name: 'key revoke',
    summary: 'revoke a key at once',
    options: { json },
    positionals: ['KEY_ID'],
    env: ADMIN_ENV,
    run: async (ctx) => admin().keyRevoke(ctx),
  },
  {
    name: 'wallet topup',
    summary: "credit an account's wallet",
    options: {
      account,
      amount: {
        type: 'string',
        placeholder: 'CREDITS',
        required: true,
        description: 'whole credits to add (1 credit = 1 toman)',
      },
      reference: {
        type: 'string',
        placeholder: 'TEXT',
        description: 'a note kept on the ledger entry (e.g. an invoice number)',
      },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().walletTopup(ctx),
  },
  {
    name: 'wallet show',
    summary: 'show the balance, the amount held and the currency',
    options: { account, json },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().walletShow(ctx),
  },
  {
    name: 'wallet ledger',
    summary: 'list the newest ledger entries',
    options: {
      account,
      limit: { type: 'string', placeholder: 'N', description: 'how many entries, 1-1000 (default 20)' },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => admin().walletLedger(ctx),
  },
  {
    name: 'payment list',
    summary: 'list wallet top-ups through the payment gateways (newest first)',
    options: {
      account: { type: 'string', placeholder: 'ID', description: "only this account's payments (acc_…)" },
      state: {
        type: 'string',
        placeholder: 'S',
        description: 'only payments in this state: pending, paid, failed or expired',
      },
      json,
    },
    positionals: [],
    run: async (ctx) => payments().paymentList(ctx),
  },
  {
    name: 'account update',
    summary:
      "set an account's own margin over dollar prices (replacing the model's and the default for its calls), or remove it",
    options: {
      account,
      margin: {
        type: 'string',
        placeholder: 'M',
        description: 'a decimal markup such as 0.10 (10 %), or none; below 0 needs --force',
      },
      force: { type: 'boolean', description: 'accept a negative margin (selling below the upstream cost)' },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => price().accountUpdate(ctx),
  },
  {
    name: 'price rate set',
    summary: 'set the exchange rate (toman per US dollar) that prices from the dollar use from now on',
    options: {
      force: { type: 'boolean', description: 'accept a rate more than 50 % above or below the current one' },
      json,
    },
    positionals: ['N'],
    env: ADMIN_ENV,
    run: async (ctx) => price().priceRateSet(ctx),
  },
  {
    name: 'price history',
    summary: 'list every exchange rate set, newest first, with when and by whom',
    options: { json },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => price().priceHistory(ctx),
  },
  {
    name: 'price list',
    summary: "list every model's credit prices in force now, with the dollar prices, rate and margin behind them",
    options: { json },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => price().priceList(ctx),
  },
  {
    name: 'usage',
    summary:
      "list an account's metered requests (newest first), or with --daily its totals per day and model/tool, or with --cache its prompt caching per key and model",
    options: {
      account,
      since: {
        type: 'string',
        placeholder: 'WHEN',
        description: 'from this time on: ISO date/time (2026-05-01, 2026-05-01T12:00:00Z) or an age (90m, 24h, 7d)',
      },
      until: { type: 'string', placeholder: 'WHEN', description: 'before this time (same forms as --since)' },
      key: { type: 'string', placeholder: 'KEY_ID', description: 'only requests made with this key (key_…)' },
      model: { type: 'string', placeholder: 'MODEL', description: 'only chat/Responses calls of this model' },
      tool: {
        type: 'string',
        placeholder: 'TOOL',
        description: 'only calls of this tool (a name MCP tools/list shows, e.g. web_search)',
      },
      'request-id': {
        type: 'string',
        placeholder: 'ID',
        description: "only the call with this id: svc's x-request-id, or the id the client sent",
      },
      limit: { type: 'string', placeholder: 'N', description: 'how many records, 1-1000 (default 20)' },
      daily: {
        type: 'boolean',
        description: 'totals per UTC day and model/tool instead of records (default: the last 30 days)',
      },
      cache: {
        type: 'boolean',
        description:
          'prompt caching per key and model instead of records: the cache-read share of input tokens and the credits caching saved (default: the last 30 days)',
      },
      json,
    },
    positionals: [],
    env: ADMIN_ENV,
    run: async (ctx) => usage().usageCommand(ctx),
  },
];

export function usageLine(command: Command): string {
  const parts = [`svc ${command.name}`, ...command.positionals];
  for (const [name, spec] of Object.entries(command.options)) {
    const text = spec.type === 'boolean' ? `--${name}` : `--${name} ${spec.placeholder ?? 'VALUE'}`;
    parts.push(spec.required === true ? text : `[${text}]`);
  }
  return parts.join(' ');
}

export function commandHelp(command: Command): string {
  const rows: [string, string][] = Object.entries(command.options).map(([name, spec]) => [
    spec.type === 'boolean' ? `--${name}` : `--${name} ${spec.placeholder ?? 'VALUE'}`,
    spec.description,
  ]);
  rows.push(['-h, --help', 'show this help']);
  const envRows: [string, string][] = (command.env ?? []).map((name) => [name, ENV_HELP[name]]);
  const width = Math.max(...rows.map(([left]) => left.length), ...envRows.map(([left]) => left.length));
  return [
    `Usage: ${usageLine(command)}`,
    '',
    `${command.summary[0]?.toUpperCase() ?? ''}${command.summary.slice(1)}.`,
    '',
    'Options:',
    ...rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`),
    ...(envRows.length === 0
      ? []
      : ['', 'Environment:', ...envRows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`)]),
  ].join('\n');
}

/** This installation's version, from its package.json (the sources' and dist/'s parent alike). */
export function version(): string {
  for (const candidate of [
    path.join(__dirname, '..', 'package.json'),
    path.join(__dirname, '..', '..', 'package.json'),
  ]) {
    try {
      const manifest = JSON.parse(fs.readFileSync(candidate, 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === 'svc' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // Not there (the other layout): try the next.
    }
  }
  return 'unknown';
}

export function globalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const envWidth = Math.max(...Object.keys(ENV_HELP).map((name) => name.length));
  return [
    'Usage: svc COMMAND [options]',
    '',
    'svc: an OpenAI-compatible chat API and remote MCP search tools, billed from a prepaid wallet.',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Admin commands (migrate, account, key, wallet, usage) work on SVC_DATABASE_URL directly, with no',
    'server running. Run "svc COMMAND --help" for the options of one command and the variables it reads.',
    'In a checkout, run this command as ./svc (or /path/to/checkout/svc from elsewhere), not as npx svc:',
    'outside the checkout npx finds an unrelated npm package of the same name.',
    '',
    'Environment:',
    ...Object.entries(ENV_HELP).map(([name, text]) => `  ${name.padEnd(envWidth)}  ${text}`),
    '',
    `Version: svc ${version()} (svc --version).`,
  ].join('\n');
}
