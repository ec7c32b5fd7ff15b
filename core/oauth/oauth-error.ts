import { SvcError } from '../errors';

/** The one scope an OAuth grant can have: the MCP tools, like a `tools`-scoped key. */
export const OAUTH_SCOPE = 'tools';

/** RFC 6749 / 7591 error codes, carried in the `oauth_error` detail. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'access_denied';

/** A refusal in OAuth's terms; `param` names the request field at fault when there is one. */
export function oauthError(code: OAuthErrorCode, message: string, param?: string): SvcError {
  return new SvcError(code === 'access_denied' ? 'permission_denied' : 'invalid_argument', message, {
    ...(param === undefined ? {} : { param }),
    details: { oauth_error: code },
  });
}
