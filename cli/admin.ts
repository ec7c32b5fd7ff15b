import {
  createAccountService,
  type AccountService,
  createAccountWithSignIn,
  consoleDb,
  listAccounts,
  setSignIn,
  loadEnv,
  loadConfig,
  splitNames,
  isSvcError,
  parseCap,
  formatKeyGrant,
  parseExpiry,
  parseGrace,
  parseKeyGrant,
  createKeyService,
  checkConcurrentLimit,
  type ApiKeyView,
  type KeyService,
  migrate,
  openStore,
  type Store,
  createWalletService,
  type LedgerEntryView,
  type WalletService,
  type WalletView,
} from '../core';
import { parseCount, parseCredits, UsageError } from './args';
import { namingDatabase, openAdminStore } from './database';
import { svcCommand } from './self';
import { readPassword } from './stdin';
import type { CommandContext } from './context';
import { isoOrNull, record, table, toJson, type JsonOut } from './output';

interface Services {
  readonly store: Store;
  readonly accounts: AccountService;
  readonly keys: KeyService;
  readonly wallet: WalletService;
}

const DEFAULT_LEDGER_LIMIT = 20;
const MAX_LEDGER_LIMIT = 1000;

/**
 * Runs `work` against the configured database (see `openAdminStore`: only `create` may make a
 * new one, so that `svc account create` works on a fresh machine and nothing else leaves an empty
 * database behind), and always closes it, so the process exits.
 */
async function withServices<T>(
  ctx: CommandContext,
  work: (services: Services) => Promise<T>,
  options: { create?: boolean } = {},
): Promise<T> {
  const { configPath } = loadEnv(ctx.env);
  // The configured models and tools, against which a key's allowed lists are checked.
  const catalog = loadConfig(configPath, ctx.env);
  const store = await openAdminStore(ctx.env, { create: options.create === true, poolSize: 2 });
  try {
    const now = (): number => Date.now();
    const services = {
      store,
      accounts: createAccountService({ store, now }),
      keys: createKeyService({ store, now, catalog }),
      wallet: createWalletService({ store, now }),
    };
    return await namingDatabase(store, () => work(services));
  } finally {
    await store.close();
  }
}

function required(ctx: CommandContext, name: string): string {
  const value = ctx.args.strings.get(name);
  // parseCommandArgs has already refused a missing required option.
  if (value === undefined) throw new Error(`--${name} is required`);
  return value;
}

function print(ctx: CommandContext, json: JsonOut, human: () => string): void {
  ctx.out(ctx.json ? toJson(json) : human());
}

function when(date: Date | null): string | null {
  return date === null ? null : date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function shownKey(key: ApiKeyView): string {
  return `${key.prefix}…${key.lastFour}`;
}

function keyJson(key: ApiKeyView): { [key: string]: JsonOut } {
  return {
    id: key.id,
    account_id: key.accountId,
    name: key.name,
    prefix: key.prefix,
    last_four: key.lastFour,
    created_at: isoOrNull(key.createdAt),
    last_used_at: isoOrNull(key.lastUsedAt),
    revoked_at: isoOrNull(key.revokedAt),
    scope: key.scope,
    manage: key.manage,
    expires_at: isoOrNull(key.expiresAt),
    lineage_id: key.lineageId,
    replaced_by: key.replacedBy,
    cap_daily: key.capDaily,
    cap_monthly: key.capMonthly,
    spent_today: key.spentToday,
    spent_this_month: key.spentThisMonth,
    cap_total: key.capTotal,
    spent_total: key.spentTotal,
    allowed_models: key.allowedModels === null ? null : [...key.allowedModels],
    allowed_tools: key.allowedTools === null ? null : [...key.allowedTools],
    concurrent_limit: key.concurrentLimit,
  };
}

function concurrentOf(limit: number | null): string {
  return limit === null ? 'default (limits.concurrent_per_key)' : limit === 0 ? 'no limit' : `at most ${limit}`;
}

/** A `--models` / `--tools` list: `a,b`, or `all` (every one). */
function namesFlag(ctx: CommandContext, name: string): string[] | undefined {
  const text = ctx.args.strings.get(name);
  if (text === undefined) return undefined;
  if (text.trim() === 'all') return [];
  const names = splitNames(text);
  if (names.length === 0) throw new UsageError(`--${name} needs names separated by commas, or all`);
  return names;
}

/** What a key may use, as the human output shows it. */
function allowedOf(names: readonly string[] | null): string {
  return names === null ? 'all' : names.join(', ');
}

/** `spent/cap`, or the spend alone when there is no cap. */
function spendOf(spent: bigint, cap: bigint | null): string {
  return cap === null ? `${spent.toString()} (no cap)` : `${spent.toString()}/${cap.toString()}`;
}

/** A cap flag: `N`, or `none` (null: no cap); undefined when the flag is absent. */
/** `--concurrent N|default`: a key's own limit of calls in flight, or null (the configured one). */
function concurrentFlag(ctx: CommandContext): number | null | undefined {
  return flag(ctx, 'concurrent', (text, param) => {
    const trimmed = text.trim();
    if (trimmed === 'default') return null;
    if (!/^\d+$/.test(trimmed))
      throw new UsageError(`${param} must be a whole number of calls (0: no limit) or default`);
    return checkConcurrentLimit(Number(trimmed));
  });
}

function capFlag(ctx: CommandContext, name: string): bigint | null | undefined {
  return flag(ctx, name, parseCap);
}

/** A flag's value checked by `parse`, its refusal a usage error naming the flag (exit status 2). */
function flag<T>(ctx: CommandContext, name: string, parse: (text: string, param: string) => T): T | undefined {
  const text = ctx.args.strings.get(name);
  if (text === undefined) return undefined;
  try {
    return parse(text, `--${name}`);
  } catch (error) {
    if (isSvcError(error) && error.code === 'invalid_argument') throw new UsageError(error.message);
    throw error;
  }
}

function futureExpiry(text: string, param: string): number {
  const ms = parseExpiry(text, param);
  if (ms <= Date.now()) throw new UsageError(`${param} must be in the future (got ${JSON.stringify(text)})`);
  return ms;
}

/** Whether a key works now, in words. */
function keyStatus(key: ApiKeyView, at: number): string {
  if (key.revokedAt !== null) return 'revoked';
  if (key.expiresAt !== null && key.expiresAt.getTime() <= at) return 'expired';
  if (key.replacedBy !== null) return `rolled to ${key.replacedBy}`;
  return 'active';
}

function walletJson(wallet: WalletView): { [key: string]: JsonOut } {
  return { account_id: wallet.accountId, balance: wallet.balance, held: wallet.held, currency: wallet.currency };
}

function entryJson(entry: LedgerEntryView): JsonOut {
  return {
    id: entry.id,
    kind: entry.kind,
    amount: entry.amount,
    balance_after: entry.balanceAfter,
    request_id: entry.requestId,
    reference: entry.reference,
    created_at: isoOrNull(entry.createdAt),
  };
}

function signed(amount: bigint): string {
  return amount > 0n ? `+${amount}` : amount.toString();
}

export async function migrateCommand(ctx: CommandContext): Promise<void> {
  const { databaseUrl } = loadEnv(ctx.env);
  const store = openStore(databaseUrl, { poolSize: 1 });
  try {
    const applied = await migrate(store);
    print(ctx, { database: store.displayUrl, applied }, () =>
      applied.length === 0
        ? `${store.displayUrl}: up to date`
        : applied.map((name) => `${store.displayUrl}: applied ${name}`).join('\n'),
    );
  } finally {
    await store.close();
  }
}

export async function accountCreate(ctx: CommandContext): Promise<void> {
  const email = ctx.args.strings.get('email');
  const fromStdin = ctx.args.flags.has('password-stdin');
  if (email === undefined && fromStdin)
    throw new UsageError(`--password-stdin needs --email (see: ${svcCommand()} account create --help)`);
  if (email !== undefined && !fromStdin) {
    throw new UsageError(
      '--email needs --password-stdin: the password is read from standard input, never from the command line',
    );
  }
  // Read before opening the database, so an empty or missing password fails without side effects.
  const password = fromStdin ? await readPassword() : undefined;
  const account = await withServices(
    ctx,
    async (s) => {
      if (email === undefined || password === undefined)
        return { ...(await s.accounts.create(required(ctx, 'name'))), email: '' };
      return createAccountWithSignIn(consoleDb(s.store), {
        name: required(ctx, 'name'),
        email,
        password,
        now: Date.now(),
      });
    },
    { create: true },
  );
  print(
    ctx,
    {
      id: account.id,
      name: account.name,
      ...(account.email === '' ? {} : { email: account.email }),
      created_at: isoOrNull(account.createdAt),
    },
    () =>
      record([
        ['account', account.id],
        ['name', account.name],
        ...(account.email === '' ? [] : ([['email', account.email]] as [string, string][])),
        ['created', when(account.createdAt)],
      ]),
  );
}

/** `svc account list`: every account, newest first, with its sign-in email and balance. */
export async function accountList(ctx: CommandContext): Promise<void> {
  const accounts = await withServices(ctx, async (s) => {
    const all = [];
    let pageToken = '';
    do {
      const page = await listAccounts(consoleDb(s.store), { limit: 500, pageToken });
      all.push(...page.accounts);
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
    return all;
  });
  print(
    ctx,
    {
      accounts: accounts.map((a) => ({
        id: a.id,
        name: a.name,
        email: a.email === '' ? null : a.email,
        balance: a.balance,
        created_at: isoOrNull(a.createdAt),
      })),
    },
    () =>
      table(
        ['id', 'name', 'sign-in email', 'balance', 'held', 'created'],
        accounts.map((a) => [a.id, a.name, a.email === '' ? null : a.email, a.balance, a.held, when(a.createdAt)]),
      ),
  );
}

/** `svc account set-sign-in`: a console sign-in for an account that exists (its keys and credit). */
export async function accountSetSignIn(ctx: CommandContext): Promise<void> {
  const accountId = required(ctx, 'account');
  const email = required(ctx, 'email');
  if (!ctx.args.flags.has('password-stdin')) {
    throw new UsageError(
      '--password-stdin is required: the password is read from standard input, never from the command line',
    );
  }
  const password = await readPassword();
  const { account, replaced } = await withServices(ctx, (s) =>
    setSignIn(consoleDb(s.store), { accountId, email, password, now: Date.now() }),
  );
  print(
    ctx,
    { id: account.id, name: account.name, email: account.email, replaced, created_at: isoOrNull(account.createdAt) },
    () =>
      record([
        ['account', account.id],
        ['name', account.name],
        ['email', account.email],
        ['sign-in', replaced ? 'replaced (its browser sessions were signed out)' : 'added'],
      ]),
  );
}

export async function keyCreate(ctx: CommandContext): Promise<void> {
  const name = ctx.args.strings.get('name');
  const scope = flag(ctx, 'scope', (text, param) => formatKeyGrant(parseKeyGrant(text, param)));
  const expiresAt = flag(ctx, 'expires', futureExpiry);
  // `none` on a new key is the same as leaving the flag out.
  const capDaily = capFlag(ctx, 'cap-daily') ?? undefined;
  const capMonthly = capFlag(ctx, 'cap-monthly') ?? undefined;
  const capTotal = capFlag(ctx, 'cap-total') ?? undefined;
  const allowedModels = namesFlag(ctx, 'models');
  const allowedTools = namesFlag(ctx, 'tools');
  const concurrentLimit = concurrentFlag(ctx) ?? undefined;
  const { key, secret } = await withServices(ctx, (s) =>
    s.keys.create({
      accountId: required(ctx, 'account'),
      ...(name === undefined ? {} : { name }),
      ...(scope === undefined ? {} : { scope }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(capDaily === undefined ? {} : { capDaily }),
      ...(capMonthly === undefined ? {} : { capMonthly }),
      ...(capTotal === undefined ? {} : { capTotal }),
      ...(allowedModels === undefined ? {} : { allowedModels }),
      ...(allowedTools === undefined ? {} : { allowedTools }),
      ...(concurrentLimit === undefined ? {} : { concurrentLimit }),
    }),
  );
  print(
    ctx,
    {
      id: key.id,
      key: secret,
      name: key.name,
      account_id: key.accountId,
      prefix: key.prefix,
      last_four: key.lastFour,
      created_at: isoOrNull(key.createdAt),
      scope: key.scope,
      manage: key.manage,
      expires_at: isoOrNull(key.expiresAt),
      cap_daily: key.capDaily,
      cap_monthly: key.capMonthly,
      cap_total: key.capTotal,
      allowed_models: key.allowedModels === null ? null : [...key.allowedModels],
      allowed_tools: key.allowedTools === null ? null : [...key.allowedTools],
      concurrent_limit: key.concurrentLimit,
    },
    () =>
      record([
        ['key id', key.id],
        ['account', key.accountId],
        ['name', key.name === '' ? null : key.name],
        ['scope', formatKeyGrant(key)],
        ['expires', when(key.expiresAt) ?? 'never'],
        ['daily cap', key.capDaily ?? 'none'],
        ['monthly cap', key.capMonthly ?? 'none'],
        ['total cap', key.capTotal ?? 'none'],
        ['models', allowedOf(key.allowedModels)],
        ['tools', allowedOf(key.allowedTools)],
        ['calls in flight', concurrentOf(key.concurrentLimit)],
        ['key', secret],
      ]),
  );
  if (!ctx.json) ctx.err('This is the only time the full key is shown: store it now.');
}

export async function keyList(ctx: CommandContext): Promise<void> {
  const accountId = required(ctx, 'account');
  const keys = await withServices(ctx, async (s) => {
    await s.accounts.get(accountId);
    return s.keys.list(accountId);
  });
  print(ctx, { keys: keys.map(keyJson) }, () =>
    table(
      ['id', 'name', 'key', 'scope', 'today', 'this month', 'created', 'last used', 'expires', 'status'],
      keys.map((k) => [
        k.id,
        k.name === '' ? null : k.name,
        shownKey(k),
        formatKeyGrant(k),
        spendOf(k.spentToday, k.capDaily),
        spendOf(k.spentThisMonth, k.capMonthly),
        when(k.createdAt),
        when(k.lastUsedAt),
        when(k.expiresAt) ?? 'never',
        keyStatus(k, Date.now()),
      ]),
    ),
  );
}

export async function keyRevoke(ctx: CommandContext): Promise<void> {
  const keyId = ctx.args.positionals[0] ?? '';
  const key = await withServices(ctx, (s) => s.keys.revoke(keyId));
  print(ctx, keyJson(key), () => `revoked ${key.id} (${shownKey(key)}) at ${when(key.revokedAt) ?? '-'}`);
}

export async function keyRoll(ctx: CommandContext): Promise<void> {
  const keyId = ctx.args.positionals[0] ?? '';
  const graceMs = flag(ctx, 'grace', parseGrace);
  const { key, secret, previous } = await withServices(ctx, (s) =>
    s.keys.roll(keyId, graceMs === undefined ? {} : { graceMs }),
  );
  print(ctx, { ...keyJson(key), key: secret, previous: keyJson(previous) }, () =>
    record([
      ['key id', key.id],
      ['account', key.accountId],
      ['name', key.name === '' ? null : key.name],
      ['scope', formatKeyGrant(key)],
      ['expires', when(key.expiresAt) ?? 'never'],
      ['key', secret],
      ['replaces', `${previous.id} (${shownKey(previous)}), which stops at ${when(previous.expiresAt) ?? '-'}`],
    ]),
  );
  if (!ctx.json) ctx.err('This is the only time the full key is shown: store it now.');
}

export async function keyCaps(ctx: CommandContext): Promise<void> {
  const keyId = ctx.args.positionals[0] ?? '';
  const daily = capFlag(ctx, 'daily');
  const monthly = capFlag(ctx, 'monthly');
  const total = capFlag(ctx, 'total');
  if (daily === undefined && monthly === undefined && total === undefined)
    throw new UsageError(
      `give --daily N|none, --monthly N|none, --total N|none or several (see: ${svcCommand()} key caps --help)`,
    );
  const key = await withServices(ctx, (s) =>
    s.keys.setCaps(keyId, {
      ...(daily === undefined ? {} : { daily }),
      ...(monthly === undefined ? {} : { monthly }),
      ...(total === undefined ? {} : { total }),
    }),
  );
  print(ctx, keyJson(key), () =>
    record([
      ['key id', key.id],
      ['lineage', key.lineageId],
      ['daily cap', key.capDaily ?? 'none'],
      ['monthly cap', key.capMonthly ?? 'none'],
      ['spent today', key.spentToday],
      ['spent this month', key.spentThisMonth],
      ['total cap', key.capTotal ?? 'none'],
      ['spent in total', key.spentTotal],
    ]),
  );
}

export async function keyUpdate(ctx: CommandContext): Promise<void> {
  const keyId = ctx.args.positionals[0] ?? '';
  const name = ctx.args.strings.get('name');
  const expiresAt = flag(ctx, 'expires', (text, param) => (text.trim() === 'never' ? null : futureExpiry(text, param)));
  const allowedModels = namesFlag(ctx, 'models');
  const allowedTools = namesFlag(ctx, 'tools');
  const capTotal = capFlag(ctx, 'cap-total');
  const concurrentLimit = concurrentFlag(ctx);
  if ([name, expiresAt, allowedModels, allowedTools, capTotal, concurrentLimit].every((v) => v === undefined))
    throw new UsageError(
      `give --name, --expires, --models, --tools, --cap-total or --concurrent (see: ${svcCommand()} key update --help)`,
    );
  const key = await withServices(ctx, async (s) => {
    // Every value is checked before anything is written: a bad one leaves the key as it was.
    const updated = await s.keys.update(keyId, {
      ...(name === undefined ? {} : { name }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(allowedModels === undefined ? {} : { allowedModels }),
      ...(allowedTools === undefined ? {} : { allowedTools }),
      ...(concurrentLimit === undefined ? {} : { concurrentLimit }),
    });
    return capTotal === undefined ? updated : s.keys.setCaps(keyId, { total: capTotal });
  });
  print(ctx, keyJson(key), () =>
    record([
      ['key id', key.id],
      ['name', key.name === '' ? null : key.name],
      ['expires', when(key.expiresAt) ?? 'never'],
      ['models', allowedOf(key.allowedModels)],
      ['tools', allowedOf(key.allowedTools)],
      ['total cap', key.capTotal ?? 'none'],
      ['spent in total', key.spentTotal],
      ['calls in flight', concurrentOf(key.concurrentLimit)],
    ]),
  );
}

export async function walletTopup(ctx: CommandContext): Promise<void> {
  const accountId = required(ctx, 'account');
  const amount = parseCredits('--amount', required(ctx, 'amount'));
  const reference = ctx.args.strings.get('reference');
  const { entry, wallet } = await withServices(ctx, (s) =>
    s.wallet.topUp({ accountId, amount, ...(reference === undefined ? {} : { reference }) }),
  );
  print(ctx, { ...walletJson(wallet), entry: entryJson(entry) }, () =>
    record([
      ['account', wallet.accountId],
      ['credited', signed(entry.amount)],
      ['balance', wallet.balance],
      ['held', wallet.held],
      ['currency', wallet.currency],
      ['entry', entry.id],
      ['reference', entry.reference === '' ? null : entry.reference],
    ]),
  );
}

export async function walletShow(ctx: CommandContext): Promise<void> {
  const accountId = required(ctx, 'account');
  const wallet = await withServices(ctx, async (s) => {
    await s.accounts.get(accountId);
    return s.wallet.get(accountId);
  });
  print(ctx, walletJson(wallet), () =>
    record([
      ['account', wallet.accountId],
      ['balance', wallet.balance],
      ['held', wallet.held],
      ['available', wallet.balance - wallet.held],
      ['currency', wallet.currency],
    ]),
  );
}

export async function walletLedger(ctx: CommandContext): Promise<void> {
  const accountId = required(ctx, 'account');
  const limitText = ctx.args.strings.get('limit');
  const limit = limitText === undefined ? DEFAULT_LEDGER_LIMIT : parseCount('--limit', limitText, MAX_LEDGER_LIMIT);
  const entries = await withServices(ctx, async (s) => {
    await s.accounts.get(accountId);
    return s.wallet.ledger(accountId, limit);
  });
  print(ctx, { account_id: accountId, entries: entries.map(entryJson) }, () =>
    table(
      ['id', 'kind', 'amount', 'balance after', 'request id', 'reference', 'created'],
      entries.map((e) => [
        e.id,
        e.kind,
        signed(e.amount),
        e.balanceAfter,
        e.requestId,
        e.reference === '' ? null : e.reference,
        when(e.createdAt),
      ]),
    ),
  );
}
