import type { CoreCallExt, CoreContext } from '../auth/context';
import type { CoreDeps } from '../deps';
import type { ModelServiceImplementation } from '../../gen/svc/core/v1/models';
import { findModel, listModelNames, toProtoModel } from './catalog';

/** ModelService: the configured models, to any caller with a valid key. */
export function createModelGrpcService(deps: Pick<CoreDeps, 'config'>): ModelServiceImplementation<CoreCallExt> {
  return {
    async listModels(_request, context: CoreContext) {
      await context.svc.requireKey({ scope: 'chat' });
      // Aliases are listed as models of their own, as OpenAI lists its aliases beside the snapshots.
      return { models: listModelNames(deps.config).map(({ name, model }) => toProtoModel(model, name)) };
    },
    async getModel(request, context: CoreContext) {
      await context.svc.requireKey({ scope: 'chat' });
      return { model: toProtoModel(findModel(deps.config, request.modelId), request.modelId) };
    },
  };
}
