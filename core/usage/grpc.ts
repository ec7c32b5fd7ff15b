import type { UsageFilter as ProtoFilter, UsageServiceImplementation } from '../../gen/svc/core/v1/usage';
import { accountOfCaller, isOperator } from '../auth/context';
import type { CoreCallContext } from '../auth/types';
import { SvcError, invalidArgument } from '../errors';
import type { UsageFilter, UsageQuery } from './query';

const STATUSES = new Set(['', 'ok', 'empty', 'error', 'refused', 'cancelled']);

function checkStatus(status: string): string {
  if (!STATUSES.has(status))
    throw invalidArgument('status', 'status must be one of ok, empty, error, refused, cancelled');
  return status;
}

/**
 * API keys and user sessions see their own account only; the admin token and operator sessions
 * any account (or all, with none named).
 */
async function scopedFilter(svc: CoreCallContext, filter: ProtoFilter | undefined): Promise<UsageFilter> {
  const caller = await svc.requireCaller();
  const requested = filter?.accountId ?? '';
  const own = isOperator(caller) ? undefined : accountOfCaller(caller, requested);
  if (own !== undefined && requested !== '' && requested !== own) {
    throw new SvcError(
      'permission_denied',
      caller.kind === 'key'
        ? 'An API key can only read the usage of its own account'
        : 'A console session can only read the usage of its own account',
    );
  }
  const since = filter?.since?.getTime();
  const until = filter?.until?.getTime();
  return {
    accountId: own ?? requested,
    keyId: filter?.keyId,
    sinceMs: since,
    untilMs: until,
    model: filter?.model,
    tool: filter?.tool,
    requestId: filter?.requestId,
    status: checkStatus(filter?.status ?? ''),
  };
}

/** The gRPC UsageService over the usage query. */
export function createUsageGrpcService(deps: {
  usage: UsageQuery;
}): UsageServiceImplementation<{ svc: CoreCallContext }> {
  return {
    async listUsage(request, { svc }) {
      const filter = await scopedFilter(svc, request.filter);
      return deps.usage.list(filter, { pageSize: request.pageSize, pageToken: request.pageToken });
    },
    async getUsageSummary(request, { svc }) {
      const filter = await scopedFilter(svc, request.filter);
      const [summary, keyTotals, cacheTotals] = await Promise.all([
        deps.usage.summary(filter),
        deps.usage.byKey(filter),
        deps.usage.cacheByKeyAndModel(filter),
      ]);
      return { ...summary, keyTotals, cacheTotals };
    },
  };
}
