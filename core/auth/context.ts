import type { CallContext } from 'nice-grpc-common';
import type { CoreCallContext } from './types';

/** What the core adds to nice-grpc's CallContext: the caller (`svc`); service implementations are typed by it. */
export type CoreCallExt = { svc: CoreCallContext };

/** The context every core handler receives: nice-grpc's CallContext and the caller's (`svc`). */
export type CoreContext = CallContext & CoreCallExt;

/** Metadata that carries the id a client gave its request (correlation only, never billing). */
export const CLIENT_REQUEST_ID = 'x-client-request-id';

/** Parses `Bearer TOKEN` (scheme case-insensitive); undefined when absent or another scheme. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
