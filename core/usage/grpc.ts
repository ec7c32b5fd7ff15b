import type { UsageFilter as ProtoFilter, UsageServiceImplementation } from '../../gen/svc/core/v1/usage';
import type { CoreCallContext } from '../auth/types';
import { SvcError } from '../errors';
import type { UsageFilter, UsageQuery } from './query';

/** API keys see their own account only; the admin token any account (or all, with none named). */
async function scopedFilter(svc: CoreCallContext, filter: ProtoFilter | undefined): Promise<UsageFilter> {
  const principal = await svc.requireKeyOrAdmin();
  const requested = filter?.accountId ?? '';
  if (principal !== null && requested !== '' && requested !== principal.accountId) {
    throw new SvcError('permission_denied', 'An API key can only read the usage of its own account');
  }
  const since = filter?.since?.getTime();
  const until = filter?.until?.getTime();
  return {
    accountId: principal?.accountId ?? requested,
    keyId: filter?.keyId,
    sinceMs: since,
    untilMs: until,
    model: filter?.model,
    tool: filter?.tool,
    requestId: filter?.requestId,
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
      return deps.usage.summary(await scopedFilter(svc, request.filter));
    },
  };
}
