import { createHash, timingSafeEqual } from 'node:crypto';
import type { AuthorizationParams as ParamsProto, OAuthServiceImplementation } from '../../gen/svc/core/v1/oauth';
import { sessionToken } from '../console/grpc';
import type { Session } from '../console/sessions';
import { SvcError } from '../errors';
import type { CoreContext } from '../auth/context';
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

function sameSecret(a: string, b: string): boolean {
  const d = (v: string): Buffer => createHash('sha256').update(v).digest();
  return timingSafeEqual(d(a), d(b));
}

/**
 * The gRPC face of the OAuth service. The token, registration and revocation endpoints are
 * public (the client proves itself by its code, verifier or token); consent and the connected
 * apps need the console session of an account.
 */
export function createOAuthGrpcService(deps: {
  oauth: OAuthService;
  /** The console's session resolution (an ended or operator-unbound session is refused there). */
  resolveSession: (token: string | undefined) => Promise<Session>;
}): OAuthServiceImplementation<{ svc: Ctx['svc'] }> {
  const { oauth } = deps;

  async function account(context: Ctx, csrf?: string): Promise<string> {
    const session = await deps.resolveSession(sessionToken(context));
    if (csrf !== undefined && (csrf === '' || !sameSecret(csrf, session.csrfToken)))
      throw new SvcError(
        'csrf_failed',
        'This form has expired or did not come from this console. Reload the page and try again.',
      );
    if (session.accountId === null)
      throw new SvcError(
        'permission_denied',
        'The operator has no wallet of its own to connect an app to: sign in as an account.',
      );
    return session.accountId;
  }

  return {
    async registerClient(request) {
      const client = await oauth.registerClient({
        redirectUris: request.redirectUris,
        clientName: request.clientName,
        tokenEndpointAuthMethod: request.tokenEndpointAuthMethod,
        grantTypes: request.grantTypes,
        responseTypes: request.responseTypes,
        scope: request.scope,
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
      const accountId = await account(context, request.csrfToken);
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
      await oauth.revokeApp(await account(context, request.csrfToken), request.grantId);
      return {};
    },
  };
}
