import type { AuthServiceImplementation } from '../../gen/svc/core/v1/auth';
import { invalidArgument } from '../errors';
import type { CoreContext } from '../auth/context';

export function createAuthGrpcService(): AuthServiceImplementation<{ svc: CoreContext['svc'] }> {
  return {
    async authenticate(request, context) {
      const scope = request.scope;
      if (scope !== '' && scope !== 'chat' && scope !== 'tools') {
        throw invalidArgument('scope', `scope must be "chat", "tools" or empty (got ${JSON.stringify(scope)})`);
      }
      const { accountId, keyId, lineageId, ...rest } = await context.svc.requireKey(scope === '' ? {} : { scope });
      return { principal: { accountId, keyId, scope: rest.scope, lineageId } };
    },
  };
}
