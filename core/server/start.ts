import { createServer, type Server } from 'nice-grpc';
import { composeServerMiddleware, type ServerMiddleware } from 'nice-grpc-common';
import { HealthDefinition, HealthServiceImpl, HealthState } from 'nice-grpc-server-health';
import { HealthCheckResponse_ServingStatus } from 'nice-grpc-server-health/lib/proto/grpc/health/v1/health';
import { storeAnswers } from '../store/outage';
import { AccountServiceDefinition } from '../../gen/svc/core/v1/accounts';
import { AuthServiceDefinition } from '../../gen/svc/core/v1/auth';
import { ChatServiceDefinition } from '../../gen/svc/core/v1/chat';
import { ConsoleServiceDefinition } from '../../gen/svc/core/v1/console';
import { EmbeddingServiceDefinition } from '../../gen/svc/core/v1/embeddings';
import { MediaServiceDefinition } from '../../gen/svc/core/v1/media';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';
import { OAuthServiceDefinition } from '../../gen/svc/core/v1/oauth';
import { PaymentServiceDefinition } from '../../gen/svc/core/v1/payments';
import { ToolServiceDefinition } from '../../gen/svc/core/v1/tools';
import { UsageServiceDefinition } from '../../gen/svc/core/v1/usage';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import { createOutcomeMiddleware } from '../telemetry/outcome-middleware';
import type { Core } from '../create-core';
import { createContextMiddleware } from './context';
import { createDrain } from './drain';
import { createErrorMiddleware } from './errors';
import { createInProcessChannel, type InProcessChannel, type ServiceBinding } from './in-process';
import { LazyServerReflectionService, lazyServerReflection } from './reflection';
import { createTunnelServer } from './tunnel';
import { TunnelServiceDefinition } from '../../gen/svc/core/v1/tunnel';

export interface CoreServer {
  /** The bound address: HOST:PORT (the real port when 0 was asked) or unix:PATH. */
  readonly address: string;
  /** The same services, with the same middleware, for callers in this process (`svc serve`). */
  readonly inProcess: InProcessChannel;
  /** Stops accepting calls, lets running ones finish (up to `graceMs`), then closes. */
  close(graceMs?: number): Promise<void>;
}

const SERVICE_NAMES = [
  AccountServiceDefinition.fullName,
  AuthServiceDefinition.fullName,
  KeyServiceDefinition.fullName,
  WalletServiceDefinition.fullName,
  ModelServiceDefinition.fullName,
  ChatServiceDefinition.fullName,
  EmbeddingServiceDefinition.fullName,
  MediaServiceDefinition.fullName,
  ToolServiceDefinition.fullName,
  ConsoleServiceDefinition.fullName,
  UsageServiceDefinition.fullName,
  OAuthServiceDefinition.fullName,
  PaymentServiceDefinition.fullName,
  TunnelServiceDefinition.fullName,
  'grpc.health.v1.Health',
];

/** How often the core pings an idle gateway connection, and how long it waits for the answer. */
const KEEPALIVE_MS = 60_000;
const KEEPALIVE_TIMEOUT_MS = 20_000;

/** How long a client's connection to the core lives before it is asked to reconnect. */
const MAX_CONNECTION_AGE_MS = 5 * 60_000;

/** The gRPC health service name that also asks the store (readiness, not liveness). */
export const READINESS_SERVICE = 'svc.ready';

/** Starts the gRPC core on `address` (HOST:PORT or unix:PATH) with health and reflection. */
export async function startCoreServer(core: Core, address: string): Promise<CoreServer> {
  const { deps } = core;
  const server: Server = createServer({
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    // A client's connection is ended (GOAWAY) after about this long, so that clients resolve the
    // core's name again and spread over cores added since. Calls in flight finish first: no grace
    // limit is set, so a long stream is never cut.
    'grpc.max_connection_age_ms': MAX_CONNECTION_AGE_MS,
    // Sized for many concurrent streams on one gateway connection: Node's HTTP/2 session refuses
    // new streams (ENHANCE_YOUR_CALM) once what it buffers passes 10 MB by default, which a few
    // hundred streams to slow readers reach; the client side of grpc-js lifts the limit the same way.
    'grpc-node.max_session_memory': Number.MAX_SAFE_INTEGER,
    // A gateway that vanished without closing its connection (a killed pod) is found by a ping.
    'grpc.keepalive_time_ms': KEEPALIVE_MS,
    'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
    // No per-call channelz bookkeeping: nothing reads it, and it is on every call's path.
    'grpc.enable_channelz': 0,
  });
  const drain = createDrain();
  // One chain for both ways in: the gRPC server and the in-process channel.
  const middleware = [
    createErrorMiddleware(deps.logger),
    createContextMiddleware({
      authenticator: core.authenticator,
      adminToken: core.adminToken,
      rateLimiter: core.rateLimiter,
      tokenLimiter: core.tokenLimiter,
      concurrency: core.concurrency,
      sessions: core.sessions,
    }),
    createOutcomeMiddleware(core.metrics),
  ].reduce<ServerMiddleware<unknown>>(
    (chain, next) => composeServerMiddleware(chain, next as ServerMiddleware<unknown, unknown>),
    drain.middleware as ServerMiddleware<unknown>,
  );
  const services = server.with(middleware);
  // The core built every implementation; the server only binds each to its definition.
  const impl = core.services;
  const bindings: ServiceBinding[] = [
    { definition: AccountServiceDefinition, implementation: impl.accounts },
    { definition: AuthServiceDefinition, implementation: impl.auth },
    { definition: KeyServiceDefinition, implementation: impl.keys },
    { definition: WalletServiceDefinition, implementation: impl.wallet },
    { definition: ModelServiceDefinition, implementation: impl.models },
    { definition: ChatServiceDefinition, implementation: impl.chat },
    { definition: EmbeddingServiceDefinition, implementation: impl.embeddings },
    { definition: MediaServiceDefinition, implementation: impl.media },
    { definition: ToolServiceDefinition, implementation: impl.tools },
    { definition: ConsoleServiceDefinition, implementation: impl.console },
    { definition: UsageServiceDefinition, implementation: impl.usage },
    { definition: OAuthServiceDefinition, implementation: impl.oauth },
    { definition: PaymentServiceDefinition, implementation: impl.payments },
  ];
  for (const { definition, implementation } of bindings) services.add(definition as never, implementation as never);
  const inProcess = createInProcessChannel(bindings, middleware);
  // The gateway's tunnel: many calls over one stream, each through the same chain. The tunnel
  // itself passes no middleware: it is no call of a service, and each call inside is checked.
  const tunnels = createTunnelServer(
    bindings,
    createInProcessChannel(bindings, middleware, { copy: false, transport: 'tunnel' }),
  );
  server.add(TunnelServiceDefinition, tunnels.implementation);

  const health = HealthState();
  const healthImpl = HealthServiceImpl(health);
  // The readiness service (`svc.ready`) is SERVING only while the store answers too (issue 48):
  // a gateway's /readyz and the core's readiness probe say not ready until the store is back. The
  // overall service ('') stays the process's liveness: a database outage must not restart cores.
  server.add(HealthDefinition, {
    ...healthImpl,
    async check(request, context) {
      if (request.service !== READINESS_SERVICE) return healthImpl.check(request, context);
      const answer = await healthImpl.check({ service: '' }, context);
      if (answer.status !== HealthCheckResponse_ServingStatus.SERVING) return answer;
      return (await storeAnswers(deps.store)) ? answer : { status: HealthCheckResponse_ServingStatus.NOT_SERVING };
    },
  });
  server.add(LazyServerReflectionService, lazyServerReflection(SERVICE_NAMES));

  const port = await server.listen(address.startsWith('unix:') ? address : address);
  const bound = address.startsWith('unix:') ? address : `${address.slice(0, address.lastIndexOf(':'))}:${port}`;
  health.setStatus('healthy');
  deps.logger.info({ address: bound }, 'core listening (gRPC)');

  return {
    address: bound,
    inProcess,
    async close(graceMs = 10_000) {
      health.setStatus('unhealthy');
      // Gateways open new tunnels elsewhere; the calls running in these finish first.
      tunnels.goAway();
      const forced = setTimeout(() => server.forceShutdown(), graceMs);
      forced.unref();
      await server.shutdown();
      clearTimeout(forced);
      // Cancelled calls may still be settling or releasing their holds.
      if (!(await drain.idle(graceMs))) deps.logger.warn('calls still running after the shutdown deadline');
      // Upstream connection pools go last: calls still running needed them.
      await core.closeUpstreams();
    },
  };
}
