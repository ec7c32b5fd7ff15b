import { Pool } from 'undici';

/** Keep-alive connection pools to the upstreams, one per origin, created on first use. */
export interface UpstreamPools {
  forOrigin(origin: string): Pool;
  close(): Promise<void>;
}

export interface UpstreamPoolOptions {
  /** Connections per origin (default 128). */
  readonly connections?: number;
  /** How long an idle connection is kept (default 60 s). */
  readonly keepAliveTimeoutMs?: number;
}

export function createUpstreamPools(options: UpstreamPoolOptions = {}): UpstreamPools {
  const pools = new Map<string, Pool>();
  return {
    forOrigin(origin) {
      let pool = pools.get(origin);
      if (pool === undefined) {
        pool = new Pool(origin, {
          connections: options.connections ?? 128,
          keepAliveTimeout: options.keepAliveTimeoutMs ?? 60_000,
          keepAliveMaxTimeout: 10 * 60_000,
          pipelining: 1,
        });
        pools.set(origin, pool);
      }
      return pool;
    },
    async close() {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((p) => p.close().catch(() => p.destroy())));
    },
  };
}
