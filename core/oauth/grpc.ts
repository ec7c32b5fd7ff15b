import type { AuthorizationParams as ParamsProto, OAuthServiceImplementation } from '../../gen/svc/core/v1/oauth';
import { SvcError } from '../errors';
import type { CoreContext } from '../auth/context';
import { clientAddressResolver } from '../auth/client-address';
import type { AuthorizationParams, OAuthClient, OAuthService } from './service';

type Ctx = CoreContext;

function paramsOf(p: ParamsProto | undefined): AuthorizationParams {
  return {
    clientId: p?.clientId ?? '',
    redirectUri: p?.redirectUri ?? '',
    responseType: p?.responseType ?? '',
    scope: p?.scope ?? '',
    codeChallenge: p?.codeChallenge ?? '',
    codeChallengeMethod: p?.codeChallengeMethod ?? '',
    resource: p?.resource ?? '',
  };
}

function clientToProto(client: OAuthClient) {
  return { ...client, redirectUris: [...client.redirectUris] };
}

/**
 * The gRPC face of the OAuth service. The token, registration and revocation endpoints are
 * public (the client proves itself by its code, verifier or token); consent and the connected
 * apps need the console session of an account.
 */
export function createOAuthGrpcService(deps: {
  oauth: OAuthService;
  /** The secret adapters send in `x-svc-adapter-token`; none: no stated address is believed. */
  adapterToken: string | undefined;
}): OAuthServiceImplementation<{ svc: Ctx['svc'] }> {
  const { oauth } = deps;
  // Open registration is limited per client address: only an adapter may state it.
  const clientAddress = clientAddressResolver(deps.adapterToken);

  async function account(context: Ctx): Promise<string> {
    const session = await context.svc.requireSession();
    if (session.accountId === null)
      throw new SvcError(
        'permission_denied',
        'The operator has no wallet of its own to connect an app to: sign in as an account.',
      );
    return session.accountId;
  }

  return {
    async registerClient(request, context) {
      const client = await oauth.registerClient({
        redirectUris: request.redirectUris,
        clientName: request.clientName,
        tokenEndpointAuthMethod: request.tokenEndpointAuthMethod,
        grantTypes: request.grantTypes,
        responseTypes: request.responseTypes,
        scope: request.scope,
        clientAddress: clientAddress(request.clientAddress, context),
      });
      return { client: clientToProto(client) };
    },
    async checkAuthorization(request, context) {
      await account(context);
      const check = await oauth.checkAuthorization(paramsOf(request.params));
      return {
        client: clientToProto(check.client),
        scope: check.scope,
        ok: check.error === undefined,
        oauthError: check.error?.code ?? '',
        errorDescription: check.error?.description ?? '',
      };
    },
    async approveAuthorization(request, context) {
      const accountId = await account(context);
      return { code: await oauth.approve(accountId, paramsOf(request.params)) };
    },
    async exchangeToken(request) {
      const pair = await oauth.exchange({
        grantType: request.grantType,
        code: request.code,
        redirectUri: request.redirectUri,
        clientId: request.clientId,
        codeVerifier: request.codeVerifier,
        refreshToken: request.refreshToken,
        resource: request.resource,
      });
      return { ...pair, expiresIn: BigInt(pair.expiresIn) };
    },
    async revokeToken(request) {
      await oauth.revokeToken(request.token, request.clientId);
      return {};
    },
    async listConnectedApps(_request, context) {
      return { apps: await oauth.listApps(await account(context)) };
    },
    async revokeConnectedApp(request, context) {
      await oauth.revokeApp(await account(context), request.grantId);
      return {};
    },
  };
}
