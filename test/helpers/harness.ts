import type http from 'node:http';
import pino, { type Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { connectCore, type CoreConnection } from '../../adapters/http/core-client';
import { startServe, type Serving } from '../../cli/serve';
import { loadConfig, parseConfig } from '../../core/config/load';
import type { SvcConfig } from '../../core/config/types';
import type { Core } from '../../core/create-core';
import { createRegistry } from '../../core/metrics/registry';
import type { GuardedFetchOptions } from '../../core/net/guarded-fetch';
import { migrate, openStore, type Store } from '../../core/store/db';
import type { LedgerEntryView, WalletView } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from './database';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface StartOptions {
  /** A validated config, or YAML text (parsed with `env`); default: the built-in sandbox config. */
  readonly config?: SvcConfig | string;
  /** Variables for `${NAME}` substitution in YAML config text. */
  readonly env?: NodeJS.ProcessEnv;
  /** Use this database instead of a fresh one (e.g. a second core on the same MySQL). */
  readonly databaseUrl?: string;
  readonly logger?: Logger;
  readonly authCacheTtlMs?: number;
  /** How long the core trusts the stored exchange rate (default 2 s; 0: read at every admission). */
  readonly priceCacheMs?: number;
  readonly maxBodyBytes?: number;
  /** The core's clock (default Date.now), so a test can move time forward (key expiry, roll grace). */
  readonly now?: () => number;
  /** The core's SVC_ADMIN_TOKEN (default TEST_ADMIN_TOKEN); null starts it without one. */
  readonly adminToken?: string | null;
  /** Accept OAuth Client ID Metadata Documents served over http from 127.0.0.1 (the spec wants https). */
  readonly oauthLoopbackMetadataDocuments?: boolean;
  /** The guarded fetcher's options for metadata documents (a test resolver, a shorter deadline). */
  readonly oauthDocumentFetch?: GuardedFetchOptions;
  /**
   * The dispatcher every upstream call goes through (as `svc serve` hands the core its Agent);
   * owned and closed by the test. Default: the core makes its own.
   */
  readonly dispatcher?: Dispatcher;
}

export interface FundedKey {
  readonly accountId: string;
  readonly keyId: string;
  /** The full API key. */
  readonly key: string;
}

/** A running svc: the real core over gRPC on 127.0.0.1:0 and the real HTTP gateway. */
export interface TestSvc {
  /** http://127.0.0.1:PORT */
  readonly baseUrl: string;
  /** Alias of baseUrl. */
  readonly httpUrl: string;
  readonly coreAddress: string;
  readonly adminToken: string;
  readonly store: Store;
  readonly core: Core;
  readonly connection: CoreConnection;
  readonly databaseUrl: string;
  readonly database: TestDatabase | undefined;
  /** The HTTP server of the gateway (e.g. to watch its WebSocket upgrades). */
  readonly server: http.Server;
  createFundedKey(balance: bigint | number, name?: string): Promise<FundedKey>;
  wallet(accountId: string): Promise<WalletView>;
  ledger(accountId: string, limit?: number): Promise<LedgerEntryView[]>;
  close(): Promise<void>;
}

function resolveConfig(options: StartOptions): SvcConfig {
  if (options.config === undefined) return loadConfig(undefined, {});
  if (typeof options.config === 'string') return parseConfig(options.config, options.env ?? {}, 'test config');
  return options.config;
}

/** How the test gateways reach their core: SVC_TEST_TRANSPORT=grpc or in-process (default). */
export function testTransport(): 'grpc' | 'in-process' {
  return process.env['SVC_TEST_TRANSPORT'] === 'grpc' ? 'grpc' : 'in-process';
}

/** Starts svc for a test; always `await svc.close()` in `after`/`afterEach`. */
export async function startSvc(options: StartOptions = {}): Promise<TestSvc> {
  const config = resolveConfig(options);
  const database = options.databaseUrl === undefined ? await createTestDatabase() : undefined;
  const databaseUrl = options.databaseUrl ?? (database as TestDatabase).url;
  const logger = options.logger ?? pino({ level: process.env['SVC_TEST_LOG'] ?? 'silent' });
  const adminToken = options.adminToken === undefined ? TEST_ADMIN_TOKEN : (options.adminToken ?? undefined);
  const store = openStore(databaseUrl);
  let serving: Serving | undefined;
  let connection: CoreConnection | undefined;

  async function close(): Promise<void> {
    connection?.close();
    await serving?.close(1000);
    await store.close();
    await database?.drop();
  }

  try {
    await migrate(store);
    // The same assembly as `svc serve` (cli/serve.ts). The adapters reach the core in process by
    // default, over gRPC with SVC_TEST_TRANSPORT=grpc (CI runs the suite both ways).
    serving = await startServe({
      config,
      store,
      logger,
      // One registry, as in `svc serve`: GET /metrics shows the core's metrics too.
      metrics: createRegistry(),
      adminToken,
      adapterToken: undefined,
      grpcAddress: '127.0.0.1:0',
      transport: testTransport(),
      // Over gRPC, the adapters call the core through four tunnels (adapters/http/tunnel.ts), so
      // that CI's gRPC pass runs every adapter suite over them; \`svc gateway\` makes a gRPC call
      // per call unless SVC_CORE_TUNNELS says otherwise, which the fault suite and the spawned
      // processes of other tests keep covering.
      coreTunnels: 4,
      httpHost: '127.0.0.1',
      httpPort: 0,
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
      // The tests move holds' expiry themselves (reapExpired with an injected clock).
      reaper: false,
      core: {
        ...(options.authCacheTtlMs === undefined ? {} : { authCacheTtlMs: options.authCacheTtlMs }),
        ...(options.priceCacheMs === undefined ? {} : { priceCacheMs: options.priceCacheMs }),
        ...(options.now === undefined ? {} : { now: options.now }),
        ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
        ...(options.oauthLoopbackMetadataDocuments === undefined
          ? {}
          : { oauthLoopbackMetadataDocuments: options.oauthLoopbackMetadataDocuments }),
        ...(options.oauthDocumentFetch === undefined ? {} : { oauthDocumentFetch: options.oauthDocumentFetch }),
      },
    });
    // Real gRPC whatever the adapters use, for the tests that call the core as an internal
    // service would.
    connection = connectCore(serving.coreServer.address);
  } catch (error) {
    await close();
    throw error;
  }

  const { core, coreServer, gateway } = serving;
  const url = gateway.url;
  return {
    baseUrl: url,
    httpUrl: url,
    coreAddress: coreServer.address,
    adminToken: adminToken ?? '',
    store,
    core,
    connection,
    databaseUrl,
    database,
    server: gateway.server,
    async createFundedKey(balance, name = 'test') {
      const account = await core.accounts.create(name);
      const { key, secret } = await core.keys.create({ accountId: account.id, name });
      const amount = BigInt(balance);
      if (amount > 0n) await core.deps.wallet.topUp({ accountId: account.id, amount, reference: 'test funding' });
      return { accountId: account.id, keyId: key.id, key: secret };
    },
    wallet: (accountId) => core.deps.wallet.get(accountId),
    ledger: (accountId, limit = 100) => core.deps.wallet.ledger(accountId, limit),
    close,
  };
}
