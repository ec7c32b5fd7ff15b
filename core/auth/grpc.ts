import type { AuthServiceImplementation } from '../../gen/svc/core/v1/auth';
import type { CoreContext } from '../server/context';

export function createAuthGrpcService(): AuthServiceImplementation<{ svc: CoreContext['svc'] }> {
  return {
    async authenticate(_request, context) {
      const { accountId, keyId, scope, lineageId } = await context.svc.requireKey();
      return { principal: { accountId, keyId, scope, lineageId } };
    },
  };
}
