import type { CoreCallExt, CoreContext } from '../auth/context';
import type { CoreDeps } from '../deps';
import type { ModelServiceImplementation } from '../../gen/svc/core/v1/models';
import { findModel, toProtoModel } from './catalog';

/** ModelService: the configured models, to any caller with a valid key. */
export function createModelGrpcService(deps: Pick<CoreDeps, 'config'>): ModelServiceImplementation<CoreCallExt> {
  return {
    async listModels(_request, context: CoreContext) {
      await context.svc.requireKey({ scope: 'chat' });
      return { models: [...deps.config.models.values()].map(toProtoModel) };
    },
    async getModel(request, context: CoreContext) {
      await context.svc.requireKey({ scope: 'chat' });
      return { model: toProtoModel(findModel(deps.config, request.modelId)) };
    },
  };
}
