import pino, { type Logger } from 'pino';
import { connectCore, connectInProcess, type CoreConnection } from '../../adapters/http/core-client';
import { startGateway, type Gateway } from '../../adapters/http/server';
import { loadConfig, parseConfig } from '../../core/config/load';
import type { SvcConfig } from '../../core/config/types';
import { createCore, type Core } from '../../core/create-core';
import { startCoreServer, type CoreServer } from '../../core/server/start';
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
  readonly maxBodyBytes?: number;
  /** The core's clock (default Date.now), so a test can move time forward (key expiry, roll grace). */
  readonly now?: () => number;
  /** The core's SVC_ADMIN_TOKEN (default TEST_ADMIN_TOKEN); null starts it without one. */
  readonly adminToken?: string | null;
  /** Accept OAuth Client ID Metadata Documents served over http from 127.0.0.1 (the spec wants https). */
  readonly oauthLoopbackMetadataDocuments?: boolean;
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
  let coreServer: CoreServer | undefined;
  let connection: CoreConnection | undefined;
  let gateway: Gateway | undefined;
  const core = createCore({
    config,
    store,
    logger,
    adminToken,
    ...(options.authCacheTtlMs === undefined ? {} : { authCacheTtlMs: options.authCacheTtlMs }),
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.oauthLoopbackMetadataDocuments === undefined
      ? {}
      : { oauthLoopbackMetadataDocuments: options.oauthLoopbackMetadataDocuments }),
  });

  async function close(): Promise<void> {
    await gateway?.close(1000);
    connection?.close();
    await coreServer?.close(1000);
    core.stop();
    await store.close();
    await database?.drop();
  }

  try {
    await migrate(store);
    coreServer = await startCoreServer(core, '127.0.0.1:0');
    connection = connectCore(coreServer.address);
    // The adapters reach the core as `svc serve` does: in process by default, over gRPC with
    // SVC_TEST_TRANSPORT=grpc (CI runs the suite both ways). `connection` stays real gRPC, for
    // the tests that call the core as an internal service would.
    gateway = await startGateway({
      connection: testTransport() === 'grpc' ? connection : connectInProcess(coreServer.inProcess),
      logger,
      host: '127.0.0.1',
      port: 0,
      maxBodyBytes: options.maxBodyBytes ?? config.limits.maxBodyBytes,
      streamStallMs: config.limits.streamStallSeconds * 1000,
      // One registry, as in `svc serve`: GET /metrics shows the core's metrics too.
      metrics: core.metrics.registry,
      adapterToken: core.adapterToken,
      metricsToken: adminToken,
    });
  } catch (error) {
    await close();
    throw error;
  }

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
