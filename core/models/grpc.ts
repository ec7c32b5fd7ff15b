import type { CallContext } from 'nice-grpc-common';
import type { CoreCallContext } from '../auth/types';
import type { CoreDeps } from '../deps';
import type { ModelServiceImplementation } from '../../gen/svc/core/v1/models';
import { findModel, toProtoModel } from './catalog';

type CoreExt = { svc: CoreCallContext };

/** ModelService: the configured models, to any caller with a valid key. */
export function createModelGrpcService(deps: Pick<CoreDeps, 'config'>): ModelServiceImplementation<CoreExt> {
  return {
    async listModels(_request, context: CallContext & CoreExt) {
      await context.svc.requireKey({ scope: 'chat' });
      return { models: [...deps.config.models.values()].map(toProtoModel) };
    },
    async getModel(request, context: CallContext & CoreExt) {
      await context.svc.requireKey({ scope: 'chat' });
      return { model: toProtoModel(findModel(deps.config, request.modelId)) };
    },
  };
}
