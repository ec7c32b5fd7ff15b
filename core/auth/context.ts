import type { CallContext } from 'nice-grpc-common';
import { SvcError, invalidArgument } from '../errors';
import type { Caller, CoreCallContext } from './types';

/** What the core adds to nice-grpc's CallContext: the caller (`svc`); service implementations are typed by it. */
export type CoreCallExt = { svc: CoreCallContext };

/** The context every core handler receives: nice-grpc's CallContext and the caller's (`svc`). */
export type CoreContext = CallContext & CoreCallExt;

/** Metadata that carries the id a client gave its request (correlation only, never billing). */
export const CLIENT_REQUEST_ID = 'x-client-request-id';
/** The client's session id, forwarded by the adapters for cache routing only (SPEC §13). */
export const SESSION_ID_METADATA = 'x-svc-session-id';

/** Parses `Bearer TOKEN` (scheme case-insensitive); undefined when absent or another scheme. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Parses `Session TOKEN` (a console session, scheme case-insensitive); undefined when absent or another scheme. */
export function sessionToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return /^\s*Session\s+(\S+)\s*$/i.exec(header)?.[1];
}

/**
 * The account a caller may act on for the account services (keys, wallet, usage, accounts): its
 * own for a key or a user session, and `requested` (required) for the admin or an operator session.
 */
export function accountOfCaller(caller: Caller, requested: string): string {
  if (caller.kind === 'key') return caller.principal.accountId;
  if (caller.kind === 'session' && caller.role === 'user') {
    if (caller.accountId === null) throw new SvcError('permission_denied', 'This session has no account');
    return caller.accountId;
  }
  if (requested === '') throw invalidArgument('account_id', 'account_id is required');
  return requested;
}

/** The admin token or an operator session: may act on any account. */
export function isOperator(caller: Caller): boolean {
  return caller.kind === 'admin' || (caller.kind === 'session' && caller.role === 'operator');
}
