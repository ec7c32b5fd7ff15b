import { createAccountService, createUsageQuery, MAX_PAGE_SIZE, type UsageFilter, type UsageView } from '../core';
import { parseCount, UsageError } from './args';
import { namingDatabase, openAdminStore } from './database';
import { svcCommand } from './self';
import type { CommandContext } from './context';
import { isoOrNull, table, toJson, type JsonOut } from './output';

const DEFAULT_LIMIT = 20;
const UNIT_MS: Readonly<Record<string, number>> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `--since`/`--until`: an ISO 8601 date or time (`2026-05-01`, `2026-05-01T12:00:00Z`), or an age
 * counted back from now (`90m`, `24h`, `7d`).
 */
export function parseTime(flag: string, text: string, now: number): number {
  const trimmed = text.trim();
  const relative = /^(\d{1,6})([mhd])$/.exec(trimmed);
  if (relative !== null) return now - Number(relative[1]) * (UNIT_MS[relative[2] ?? 'd'] ?? 0);
  const at = /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(trimmed) ? Date.parse(trimmed) : NaN;
  if (Number.isNaN(at)) {
    throw new UsageError(
      `${flag} must be an ISO date or time (2026-05-01, 2026-05-01T12:00:00Z) or an age like 90m, 24h, 7d (got ${JSON.stringify(text)})`,
    );
  }
  return at;
}

function recordJson(r: UsageView): JsonOut {
  return {
    request_id: r.requestId,
    client_request_id: r.clientRequestId === '' ? null : r.clientRequestId,
    account_id: r.accountId,
    key_id: r.keyId,
    kind: r.kind,
    model: r.model === '' ? null : r.model,
    tool: r.tool === '' ? null : r.tool,
    provider: r.provider,
    status: r.status,
    error_code: r.errorCode === '' ? null : r.errorCode,
    input_tokens: r.inputTokens,
    output_tokens: r.outputTokens,
    // The five counts apart (SPEC §13): uncached input, cache reads, five-minute and one-hour
    // writes, output (input_tokens is their input sum; cache_write_tokens both write tiers).
    uncached_input_tokens: r.inputTokens - r.cachedTokens - r.cacheWriteTokens,
    cached_tokens: r.cachedTokens,
    cache_write_tokens: r.cacheWriteTokens,
    cache_write_5m_tokens: r.cacheWriteTokens - r.cacheWrite1hTokens,
    cache_write_1h_tokens: r.cacheWrite1hTokens,
    // What a media call (SPEC §14) was billed by: images, input characters, seconds of audio or
    // searches; 0 for chat, embeddings and tools.
    media_units: r.mediaUnits,
    cost: r.cost,
    latency_ms: r.latencyMs,
    created_at: isoOrNull(r.createdAt),
    // What it was charged at: credit prices, and the dollar prices, rate and margin behind them.
    pricing: r.pricing === undefined || r.pricing === null ? null : (JSON.parse(r.pricing) as JsonOut),
  };
}

/**
 * The cache-read share of the input tokens, in percent with one decimal, rounded down (a share
 * shown, computed in integers); null when there was no input.
 */
export function readShare(cached: bigint, input: bigint): string | null {
  if (input <= 0n) return null;
  const permille = (cached * 1000n) / input;
  return `${permille / 10n}.${permille % 10n}`;
}

function filterFrom(ctx: CommandContext, accountId: string, now: number): UsageFilter {
  const s = ctx.args.strings;
  const model = s.get('model');
  const tool = s.get('tool');
  if (model !== undefined && tool !== undefined)
    throw new UsageError(`give --model or --tool, not both (see: ${svcCommand()} usage --help)`);
  const since = s.get('since');
  const until = s.get('until');
  const sinceMs = since === undefined ? undefined : parseTime('--since', since, now);
  const untilMs = until === undefined ? undefined : parseTime('--until', until, now);
  if (sinceMs !== undefined && untilMs !== undefined && sinceMs >= untilMs)
    throw new UsageError('--since must be before --until');
  return { accountId, keyId: s.get('key'), sinceMs, untilMs, model, tool, requestId: s.get('request-id') };
}

/** `svc usage`: an account's metered requests, newest first, or (`--daily`) its totals per day and model/tool. */
export async function usageCommand(ctx: CommandContext): Promise<void> {
  const accountId = ctx.args.strings.get('account') ?? '';
  const limitText = ctx.args.strings.get('limit');
  const limit = limitText === undefined ? DEFAULT_LIMIT : parseCount('--limit', limitText, MAX_PAGE_SIZE);
  const now = Date.now();
  const filter = filterFrom(ctx, accountId, now);
  const store = await openAdminStore(ctx.env, { create: false, poolSize: 2 });
  try {
    await namingDatabase(store, () => createAccountService({ store, now: () => now }).get(accountId));
    const usage = createUsageQuery({ store, now: () => now });
    if (ctx.args.flags.has('daily') && ctx.args.flags.has('cache'))
      throw new UsageError(`give --daily or --cache, not both (see: ${svcCommand()} usage --help)`);
    if (ctx.args.flags.has('cache')) {
      const totals = (await usage.cacheByKeyAndModel(filter)).map((c) => ({
        key_id: c.keyId,
        model: c.model,
        requests: c.requests,
        input_tokens: c.inputTokens,
        cached_tokens: c.cachedTokens,
        cache_read_share: readShare(c.cachedTokens, c.inputTokens),
        cache_write_5m_tokens: c.cacheWriteTokens - c.cacheWrite1hTokens,
        cache_write_1h_tokens: c.cacheWrite1hTokens,
        output_tokens: c.outputTokens,
        saved: c.saved,
        cost: c.cost,
      }));
      const saved = totals.reduce((n, c) => n + c.saved, 0n);
      ctx.out(
        ctx.json
          ? toJson({
              account_id: accountId,
              // The share as a number of percent (one decimal), null without input.
              cache: totals.map((c) => ({
                ...c,
                cache_read_share: c.cache_read_share === null ? null : Number(c.cache_read_share),
              })),
              total_saved: saved,
            })
          : `${table(
              [
                'key',
                'model',
                'requests',
                'input tokens',
                'cache read',
                'read share',
                'writes 5m',
                'writes 1h',
                'saved',
                'cost',
              ],
              totals.map((c) => [
                c.key_id,
                c.model,
                c.requests,
                c.input_tokens,
                c.cached_tokens,
                c.cache_read_share === null ? '-' : `${c.cache_read_share}%`,
                c.cache_write_5m_tokens,
                c.cache_write_1h_tokens,
                c.saved,
                c.cost,
              ]),
            )}\ncaching saved ${saved} credits`,
      );
      return;
    }
    if (ctx.args.flags.has('daily')) {
      const summary = await usage.summary(filter);
      const totals = summary.totals.map((t) => ({
        day: t.day,
        kind: t.kind,
        model: t.model === '' ? null : t.model,
        tool: t.tool === '' ? null : t.tool,
        requests: t.requests,
        charged_requests: t.chargedRequests,
        input_tokens: t.inputTokens,
        output_tokens: t.outputTokens,
        cost: t.cost,
      }));
      ctx.out(
        ctx.json
          ? toJson({
              account_id: accountId,
              totals,
              total_requests: summary.totalRequests,
              total_cost: summary.totalCost,
            })
          : `${table(
              ['day', 'kind', 'model/tool', 'requests', 'charged', 'input tokens', 'output tokens', 'cost'],
              totals.map((t) => [
                t.day,
                t.kind,
                t.model ?? t.tool,
                t.requests,
                t.charged_requests,
                t.input_tokens,
                t.output_tokens,
                t.cost,
              ]),
            )}\ntotal: ${summary.totalRequests} requests, ${summary.totalCost} credits`,
      );
      return;
    }
    const page = await usage.list(filter, { pageSize: limit, pageToken: '' });
    ctx.out(
      ctx.json
        ? toJson({ account_id: accountId, records: page.records.map(recordJson), more: page.nextPageToken !== '' })
        : table(
            ['created', 'request id', 'key', 'model/tool', 'status', 'in', 'out', 'cost', 'ms'],
            page.records.map((r) => [
              r.createdAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
              r.requestId,
              r.keyId,
              r.model === '' ? r.tool : r.model,
              r.errorCode === '' ? r.status : `${r.status} (${r.errorCode})`,
              r.inputTokens,
              r.outputTokens,
              r.cost,
              r.latencyMs,
            ]),
          ),
    );
  } finally {
    await store.close();
  }
}
