import type { Logger } from 'pino';
import type { CoreClients } from './core-client';

/** What every HTTP adapter's `createApp(deps)` receives. */
export interface AdapterDeps {
  readonly core: CoreClients;
  readonly logger: Logger;
  /** Largest accepted request body, in bytes (config `limits.max_body_bytes`). */
  readonly maxBodyBytes: number;
  /**
   * Origins allowed to call from a browser (MCP Origin validation). Requests without an Origin
   * header are always allowed; localhost origins are allowed by default.
   */
  readonly allowedOrigins: readonly string[];
}

/** Koa state every adapter can rely on (set by the shared request-id middleware). */
export interface AdapterState {
  requestId: string;
}
