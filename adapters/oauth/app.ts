import Koa, { type Context } from 'koa';
import { isSvcError, mappingFor } from '../../core/edge';
import { callCore, type CallMeta } from '../http/core-client';
import { outcomeOf } from '../http/core-outcome';
import { publicBaseUrl } from '../http/public-url';
import { clientGoneSignal, readBody, requestIdMiddleware, requestIds } from '../http/request';
import type { AdapterDeps, AdapterState } from '../http/types';

/** The paths this adapter answers (the gateway hands it these, unprefixed). */
export function isOAuthPath(path: string): boolean {
  return path.startsWith('/.well-known/oauth-') || path.startsWith('/oauth/');
}

const SCOPES = ['tools'];
/** The largest client registration body (RFC 7591 metadata): larger is 413. */
export const MAX_REGISTRATION_BYTES = 8 * 1024;

class OAuthReply extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
  ) {
    super(description);
  }
}

function json(ctx: Context, status: number, body: unknown): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}

/** RFC 6749 §5.2 / RFC 7591 §3.2.2: `{error, error_description}`; a bad client is 401. */
function oauthFailure(error: unknown): OAuthReply {
  if (error instanceof OAuthReply) return error;
  if (isSvcError(error)) {
    const code = error.details?.['oauth_error'];
    if (typeof code === 'string') return new OAuthReply(code === 'invalid_client' ? 401 : 400, code, error.message);
    if (error.code === 'rate_limited') return new OAuthReply(429, 'slow_down', error.message);
    if (error.code === 'request_too_large') return new OAuthReply(413, 'invalid_request', error.message);
    if (error.code === 'unavailable') return new OAuthReply(503, 'temporarily_unavailable', error.message);
    const status = mappingFor(error.code).http;
    if (status >= 400 && status < 500) return new OAuthReply(status, 'invalid_request', error.message);
  }
  return new OAuthReply(500, 'server_error', 'The authorization server could not complete this request.');
}

async function readParams(ctx: Context, maxBytes: number): Promise<URLSearchParams> {
  const type = ctx.get('content-type').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded')
    throw new OAuthReply(400, 'invalid_request', 'Send the parameters as application/x-www-form-urlencoded.');
  const params = new URLSearchParams((await readBody(ctx, maxBytes)).toString('utf8'));
  for (const name of new Set(params.keys()))
    if (params.getAll(name).length > 1)
      throw new OAuthReply(400, 'invalid_request', `The parameter ${name} is sent more than once.`);
  return params;
}

/** A public client may still send its id in HTTP Basic (with an empty secret). */
function basicClientId(header: string): string {
  const encoded = /^\s*Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header)?.[1];
  if (encoded === undefined) return '';
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  try {
    return decodeURIComponent(colon < 0 ? decoded : decoded.slice(0, colon));
  } catch {
    return '';
  }
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/**
 * OAuth 2.1 for MCP clients without a static key (SPEC §8): RFC 9728 protected-resource metadata,
 * RFC 8414 authorization-server metadata, the token, registration (RFC 7591) and revocation (RFC
 * 7009) endpoints. `/oauth/authorize` hands over to the console, which signs the person in and
 * asks for consent. The core decides everything; this only translates.
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core } = deps;

  function meta(ctx: Context): CallMeta {
    return {
      authorization: undefined,
      ids: requestIds(ctx),
      signal: clientGoneSignal(ctx),
      outcome: outcomeOf(ctx.req),
    };
  }

  function base(ctx: Context): string {
    return publicBaseUrl(ctx, deps.publicUrl);
  }

  function resourceMetadata(ctx: Context): object {
    const b = base(ctx);
    return {
      resource: `${b}/v1/mcp`,
      authorization_servers: [b],
      scopes_supported: SCOPES,
      bearer_methods_supported: ['header'],
      resource_name: 'svc MCP tools',
    };
  }

  function serverMetadata(ctx: Context): object {
    const b = base(ctx);
    return {
      issuer: b,
      authorization_endpoint: `${b}/oauth/authorize`,
      token_endpoint: `${b}/oauth/token`,
      registration_endpoint: `${b}/oauth/register`,
      revocation_endpoint: `${b}/oauth/revoke`,
      scopes_supported: SCOPES,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
      service_documentation: `${b}/console/connect`,
    };
  }

  async function token(ctx: Context): Promise<void> {
    const p = await readParams(ctx, 16 * 1024);
    const reply = await callCore(meta(ctx), (o) =>
      core.oauth.exchangeToken(
        {
          grantType: p.get('grant_type') ?? '',
          code: p.get('code') ?? '',
          redirectUri: p.get('redirect_uri') ?? '',
          clientId: p.get('client_id') ?? basicClientId(ctx.get('authorization')),
          codeVerifier: p.get('code_verifier') ?? '',
          refreshToken: p.get('refresh_token') ?? '',
          resource: p.get('resource') ?? '',
        },
        o,
      ),
    );
    json(ctx, 200, {
      access_token: reply.accessToken,
      token_type: 'Bearer',
      expires_in: Number(reply.expiresIn),
      refresh_token: reply.refreshToken,
      scope: reply.scope,
    });
  }

  async function register(ctx: Context): Promise<void> {
    const type = ctx.get('content-type').split(';', 1)[0]?.trim().toLowerCase();
    if (type !== 'application/json')
      throw new OAuthReply(400, 'invalid_client_metadata', 'Send the client metadata as application/json.');
    // RFC 7591 metadata is a few hundred bytes; a larger body is refused as it arrives (413).
    const raw = await readBody(ctx, MAX_REGISTRATION_BYTES);
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new OAuthReply(400, 'invalid_client_metadata', 'The client metadata is not valid JSON.');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new OAuthReply(400, 'invalid_client_metadata', 'The client metadata must be a JSON object.');
    const m = body as Record<string, unknown>;
    // The socket's address, stated with the adapter's credential: registration is limited per address.
    const registering = { ...meta(ctx), adapterToken: deps.adapterToken };
    const { client } = await callCore(registering, (o) =>
      core.oauth.registerClient(
        {
          redirectUris: strings(m['redirect_uris']),
          clientName: text(m['client_name']),
          tokenEndpointAuthMethod: text(m['token_endpoint_auth_method']),
          grantTypes: strings(m['grant_types']),
          responseTypes: strings(m['response_types']),
          scope: text(m['scope']),
          clientUri: text(m['client_uri']),
          clientAddress: ctx.req.socket.remoteAddress ?? 'unknown',
        },
        o,
      ),
    );
    if (client === undefined) throw new Error('core returned no client');
    json(ctx, 201, {
      client_id: client.clientId,
      client_id_issued_at: Math.floor((client.createdAt?.getTime() ?? Date.now()) / 1000),
      client_name: client.clientName,
      redirect_uris: client.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: SCOPES.join(' '),
    });
  }

  async function revoke(ctx: Context): Promise<void> {
    const p = await readParams(ctx, 16 * 1024);
    const tokenText = p.get('token') ?? '';
    if (tokenText === '') throw new OAuthReply(400, 'invalid_request', 'token is required.');
    await callCore(meta(ctx), (o) =>
      core.oauth.revokeToken(
        { token: tokenText, clientId: p.get('client_id') ?? basicClientId(ctx.get('authorization')) },
        o,
      ),
    );
    ctx.status = 200;
    ctx.body = '';
  }

  const routes: Record<string, { method: 'GET' | 'POST'; run: (ctx: Context) => Promise<void> | void }> = {
    '/.well-known/oauth-protected-resource': { method: 'GET', run: (ctx) => json(ctx, 200, resourceMetadata(ctx)) },
    '/.well-known/oauth-protected-resource/v1/mcp': {
      method: 'GET',
      run: (ctx) => json(ctx, 200, resourceMetadata(ctx)),
    },
    '/.well-known/oauth-authorization-server': { method: 'GET', run: (ctx) => json(ctx, 200, serverMetadata(ctx)) },
    '/oauth/authorize': {
      method: 'GET',
      // The console signs the person in and asks for consent, under its own cookie path.
      run: (ctx) => {
        ctx.status = 302;
        ctx.redirect(`/console/authorize${ctx.querystring === '' ? '' : `?${ctx.querystring}`}`);
      },
    },
    '/oauth/token': { method: 'POST', run: token },
    '/oauth/register': { method: 'POST', run: register },
    '/oauth/revoke': { method: 'POST', run: revoke },
  };

  app.use(requestIdMiddleware);
  app.use(async (ctx) => {
    // No cookies are read here, so any origin may call (browser-based MCP clients do).
    ctx.set('access-control-allow-origin', '*');
    ctx.set('cache-control', 'no-store');
    ctx.set('pragma', 'no-cache');
    const route = routes[ctx.path];
    if (ctx.method === 'OPTIONS' && route !== undefined) {
      ctx.set('access-control-allow-methods', `${route.method}, OPTIONS`);
      ctx.set('access-control-allow-headers', 'authorization, content-type, mcp-protocol-version');
      ctx.status = 204;
      return;
    }
    try {
      if (route === undefined) throw new OAuthReply(404, 'invalid_request', `No OAuth endpoint at ${ctx.path}.`);
      if (ctx.method !== route.method && !(route.method === 'GET' && ctx.method === 'HEAD')) {
        ctx.set('allow', route.method);
        throw new OAuthReply(405, 'invalid_request', `${ctx.path} takes ${route.method} only.`);
      }
      await route.run(ctx);
    } catch (error) {
      const reply = oauthFailure(error);
      if (reply.status >= 500) deps.logger.warn({ err: error, requestId: ctx.state.requestId }, 'oauth request failed');
      if (reply.status === 401) ctx.set('www-authenticate', 'Basic realm="svc"');
      const retry = isSvcError(error) ? error.details?.['retry_after_s'] : undefined;
      if (reply.status === 429 && typeof retry === 'number') ctx.set('retry-after', String(retry));
      json(ctx, reply.status, { error: reply.error, error_description: reply.description });
    }
  });
  return app;
}
