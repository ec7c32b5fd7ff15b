import type { Logger } from 'pino';
import type { CoreClients } from './core-client';
import type { RequestIds } from './request';

/** What every HTTP adapter's `createApp(deps)` receives. */
export interface AdapterDeps {
  readonly core: CoreClients;
  readonly logger: Logger;
  /** Largest accepted request body, in bytes (config `limits.max_body_bytes`). */
  readonly maxBodyBytes: number;
  /** Largest multipart upload, in bytes (config `limits.max_upload_bytes`; default 25 MiB). */
  readonly maxUploadBytes?: number | undefined;
  /**
   * Origins allowed to call from a browser (MCP Origin validation). Requests without an Origin
   * header are always allowed; localhost origins are allowed by default.
   */
  readonly allowedOrigins: readonly string[];
  /** How long a streaming client may stop reading before its stream is cut (config `limits.stream_stall_seconds`). */
  readonly streamStallMs?: number | undefined;
  /**
   * The console adapter's proof of itself to the core (the admin token, or in `svc serve` a
   * secret of the process): without it the core limits sign-ins by the gateway's own address.
   */
  readonly adapterToken?: string | undefined;
  /** SVC_PUBLIC_URL: the issuer of OAuth and the base of the MCP resource; default: the request's Host. */
  readonly publicUrl?: string | undefined;
  /**
   * Whether the console offers the operator's sign-in (an SVC_ADMIN_TOKEN is set); default true.
   * Without a token the core refuses it anyway: the form would only lead to that refusal.
   */
  readonly operatorSignIn?: boolean | undefined;
}

/** Koa state every adapter can rely on (set by the shared request-id middleware). */
export interface AdapterState {
  /** The id svc answers with (see `RequestIds`). */
  requestId: string;
  ids: RequestIds;
}
