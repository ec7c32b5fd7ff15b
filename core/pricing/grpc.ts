import type { CoreContext } from '../auth/context';
import type { Caller } from '../auth/types';
import type { SvcConfig } from '../config/types';
import type { Store } from '../store/db';
import type { Logger } from 'pino';
import type { PriceBook } from './book';
import type { ModelPrices as ProtoModelPrices } from '../../gen/svc/core/v1/models';
import { createAudit } from '../accounts/audit';
import { createAccountMargins } from './margins';
import { priceLines, type ModelPriceLines } from './prices';
import { createRateStore, DEPLOYMENT_AUDIT } from './rates';
import { marginReport } from './report';

interface PricingDeps {
  readonly config: Pick<SvcConfig, 'models' | 'pricing'>;
  readonly store: Store;
  readonly now: () => number;
  readonly logger: Logger;
  readonly prices: Pick<PriceBook, 'rate'>;
}

function toProto(models: readonly ModelPriceLines[]): ProtoModelPrices[] {
  return models.map((m) => ({
    id: m.id,
    kind: m.kind,
    margin: m.margin?.toString() ?? '',
    prices: m.lines.map((line) => ({ key: line.key, credits: line.credits, usd: line.usd?.toString() ?? '' })),
  }));
}

/** Who changed the rate, for its history and the audit log. */
function whoIs(caller: Caller): string {
  if (caller.kind === 'session') return `console:${caller.role}`;
  return caller.kind === 'admin' ? 'admin' : 'key';
}

/**
 * ModelService's prices (SPEC §15): the prices in force for the caller, and for the operator the
 * rate, its history and changes, and the margin report.
 */
export function createPricingGrpcMethods(deps: PricingDeps) {
  const rates = createRateStore({ store: deps.store, now: deps.now });
  const margins = createAccountMargins({ store: deps.store, now: deps.now });
  const audit = createAudit({ store: deps.store, now: deps.now, logger: deps.logger });
  return {
    async listPrices(_request: unknown, context: CoreContext) {
      const caller = await context.svc.requireCaller();
      const accountId =
        caller.kind === 'key' ? caller.principal.accountId : caller.kind === 'session' ? caller.accountId : null;
      const [rate, margin] = await Promise.all([
        deps.prices.rate(),
        accountId === null ? undefined : margins.get(accountId),
      ]);
      return { rate: rate ?? 0n, models: toProto(priceLines(deps.config, rate, margin)) };
    },

    async getPricing(_request: unknown, context: CoreContext) {
      context.svc.requireAdmin();
      const [history, entries] = await Promise.all([rates.history(100), audit.list(DEPLOYMENT_AUDIT, 50)]);
      // The stored rate as of now (not the price book's cached one): the page shows a change at once.
      const rate = history[0]?.rate ?? deps.config.pricing?.rate;
      return {
        rate: rate ?? 0n,
        margin: deps.config.pricing?.margin?.toString() ?? '',
        history: history.map((r) => ({ rate: r.rate, setAt: r.setAt, by: r.by })),
        models: toProto(priceLines(deps.config, rate)),
        audit: entries.map((e) => ({ action: e.action, detail: e.detail, createdAt: e.createdAt })),
      };
    },

    async setRate(request: { rate: bigint; force: boolean }, context: CoreContext) {
      context.svc.requireAdmin();
      const caller = await context.svc.requireCaller();
      const set = await rates.set(request.rate, whoIs(caller), {
        force: request.force,
        fileRate: deps.config.pricing?.rate,
      });
      deps.logger.info({ rate: set.rate, previous: set.previous, by: whoIs(caller) }, 'operator action: rate set');
      return { rate: set.rate, previous: set.previous ?? 0n, setAt: set.setAt };
    },

    async getMarginReport(request: { fromDay: string; toDay: string }, context: CoreContext) {
      context.svc.requireAdmin();
      const rows = await marginReport(deps.store, request.fromDay, request.toDay);
      return {
        rows: rows.map((r) => ({
          day: r.day,
          model: r.model,
          calls: r.calls,
          revenue: r.revenue,
          costUsd: r.costUsd.toString(),
          cost: r.cost,
          margin: r.margin,
          unpricedCalls: r.unpricedCalls,
        })),
      };
    },
  };
}
