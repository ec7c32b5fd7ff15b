import { mayUseModel, requireModel } from '../auth/scope';
import type { CoreCallExt, CoreContext } from '../auth/context';
import type { CoreDeps } from '../deps';
import type { ModelServiceImplementation } from '../../gen/svc/core/v1/models';
import { findModel, listModelNames, toProtoModel } from './catalog';
import { createPricingGrpcMethods } from '../pricing/grpc';

/** ModelService: the configured models, to any caller with a valid key. */
export function createModelGrpcService(
  deps: Pick<CoreDeps, 'config' | 'store' | 'now' | 'logger' | 'prices'>,
): ModelServiceImplementation<CoreCallExt> {
  return {
    ...createPricingGrpcMethods(deps),
    async listModels(_request, context: CoreContext) {
      // A console session (the prices page) sees every model; anyone else needs a chat key.
      const caller = context.svc.isSession() ? await context.svc.requireSession() : undefined;
      const principal = caller === undefined ? await context.svc.requireKey({ scope: 'chat' }) : null;
      // Aliases are listed as models of their own, as OpenAI lists its aliases beside the snapshots;
      // a key limited to some models sees only those (and their aliases).
      return {
        models: listModelNames(deps.config)
          .filter(({ model }) => principal === null || mayUseModel(principal, model.id))
          .map(({ name, model }) => toProtoModel(model, name)),
      };
    },
    async getModel(request, context: CoreContext) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      const model = findModel(deps.config, request.modelId);
      requireModel(principal, model.id, request.modelId);
      return { model: toProtoModel(model, request.modelId) };
    },
  };
}
