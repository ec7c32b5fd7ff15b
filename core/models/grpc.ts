import { mayUseModel, requireModel } from '../auth/scope';
import type { CoreCallExt, CoreContext } from '../auth/context';
import type { ModelConfig } from '../config/types';
import type { CoreDeps } from '../deps';
import type { ModelServiceImplementation } from '../../gen/svc/core/v1/models';
import { findModel, listModelNames, toProtoModel } from './catalog';
import { createPricingGrpcMethods } from '../pricing/grpc';

/** ModelService: the configured models, to any caller with a valid key. */
export function createModelGrpcService(
  deps: Pick<CoreDeps, 'config' | 'store' | 'now' | 'logger' | 'prices'>,
): ModelServiceImplementation<CoreCallExt> {
  /**
   * Each model as a call the caller's account makes now would pay for it (SPEC §15): a model priced
   * from the dollar at the rate in force and the margin in force (the account's own, if it has one),
   * through the price book admission uses; a model priced in credits as configured.
   */
  async function priced(models: readonly ModelConfig[], accountId: string | null): Promise<Map<string, ModelConfig>> {
    const unique = [...new Set(models)];
    const out = await Promise.all(unique.map((model) => deps.prices.price(model, accountId ?? undefined)));
    return new Map(unique.map((model, i) => [model.id, out[i] ?? model]));
  }

  return {
    ...createPricingGrpcMethods(deps),
    async listModels(_request, context: CoreContext) {
      // A console session (the prices page) sees every model; anyone else needs a chat key.
      const caller = context.svc.isSession() ? await context.svc.requireSession() : undefined;
      const principal = caller === undefined ? await context.svc.requireKey({ scope: 'chat' }) : null;
      // Aliases are listed as models of their own, as OpenAI lists its aliases beside the snapshots;
      // a key limited to some models sees only those (and their aliases).
      const names = listModelNames(deps.config).filter(
        ({ model }) => principal === null || mayUseModel(principal, model.id),
      );
      const prices = await priced(
        names.map(({ model }) => model),
        principal?.accountId ?? caller?.accountId ?? null,
      );
      return { models: names.map(({ name, model }) => toProtoModel(prices.get(model.id) ?? model, name)) };
    },
    async getModel(request, context: CoreContext) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      const model = findModel(deps.config, request.modelId);
      requireModel(principal, model.id, request.modelId);
      return { model: toProtoModel(await deps.prices.price(model, principal.accountId), request.modelId) };
    },
  };
}
