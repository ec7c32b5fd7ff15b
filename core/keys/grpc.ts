import type { KeyServiceImplementation } from '../../gen/svc/core/v1/keys';
import type { CoreContext } from '../server/context';
import { SvcError, invalidArgument } from '../errors';
import type { ApiKeyView, KeyService } from './service';

function toProto(key: ApiKeyView) {
  return {
    ...key,
    lastUsedAt: key.lastUsedAt ?? undefined,
    revokedAt: key.revokedAt ?? undefined,
  };
}

export function createKeyGrpcService(deps: { keys: KeyService }): KeyServiceImplementation<{ svc: CoreContext['svc'] }> {
  return {
    async createKey(request, context) {
      context.svc.requireAdmin();
      if (request.accountId === '') throw invalidArgument('account_id', 'account_id is required');
      const { key, secret } = await deps.keys.create({ accountId: request.accountId, name: request.name });
      return { key: toProto(key), secret };
    },
    async listKeys(request, context) {
      const principal = await context.svc.requireKeyOrAdmin();
      const accountId = principal?.accountId ?? request.accountId;
      if (accountId === '') throw invalidArgument('account_id', 'account_id is required');
      const keys = await deps.keys.list(accountId);
      return { keys: keys.map(toProto) };
    },
    async revokeKey(request, context) {
      const principal = await context.svc.requireKeyOrAdmin();
      if (request.keyId === '') throw invalidArgument('key_id', 'key_id is required');
      const key = await deps.keys.get(request.keyId);
      // Another account's key looks exactly like a key that does not exist.
      if (principal !== null && key.accountId !== principal.accountId) {
        throw new SvcError('not_found', `No API key ${JSON.stringify(request.keyId)}`, { param: 'key_id' });
      }
      return { key: toProto(await deps.keys.revoke(request.keyId)) };
    },
  };
}
