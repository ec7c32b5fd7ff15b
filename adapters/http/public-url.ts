import type { Context } from 'koa';

const HOST_RE = /^[A-Za-z0-9.:[\]-]{1,255}$/;

/**
 * The address clients reach svc at, without a trailing slash: SVC_PUBLIC_URL when set (it names
 * the OAuth issuer and the MCP resource, so a deployment behind a proxy must set it), else the
 * request's own Host (local use).
 */
export function publicBaseUrl(ctx: Context, configured: string | undefined): string {
  if (configured !== undefined && configured !== '') return configured.replace(/\/+$/, '');
  const forwarded = ctx.get('x-forwarded-proto').split(',', 1)[0]?.trim().toLowerCase();
  const https = forwarded === 'https' || (ctx.req.socket as { encrypted?: boolean }).encrypted === true;
  const host = ctx.get('host');
  return `${https ? 'https' : 'http'}://${HOST_RE.test(host) ? host : 'localhost'}`;
}

/** Where the MCP server's protected-resource metadata (RFC 9728) is served. */
export function resourceMetadataUrl(base: string): string {
  return `${base}/.well-known/oauth-protected-resource/v1/mcp`;
}
