import assert from 'node:assert/strict';
import { createServer, Metadata, ServerError, Status, type Server } from 'nice-grpc';
import { connectCore, callCore, streamCore, type CoreConnection } from '../../adapters/http/core-client';
import { callerIds } from '../../adapters/http/request';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { ListModelsResponse, ModelServiceDefinition } from '../../gen/svc/core/v1/models';
import { SvcError } from '../../core/errors';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';
import { until } from '../helpers/until';

const params = { model: 'svc-pro', messages: [{ role: ChatRole.CHAT_ROLE_USER, content: 'hello tunnel' }] };
const meta = (key: string, id: string, signal?: AbortSignal) => ({
  authorization: `Bearer ${key}`,
  ids: callerIds(id),
  ...(signal === undefined ? {} : { signal }),
});

/*
 * The gateway's tunnel (issue 46 point 1): the core's unary and streamed calls as frames on a few
 * long-lived streams. Everything a call of its own does must hold inside: money, errors with
 * their trailers, cancellation, back-pressure, a core without the service, rotation, shutdown.
 */
describe('the gateway tunnel to the core', function () {
  this.timeout(30_000);

  describe('on the sandbox', () => {
    let svc: TestSvc;
    let connection: CoreConnection;

    before(async () => {
      svc = await startSvc();
      connection = connectCore(svc.coreAddress, { tunnels: 1 });
    });
    after(async () => {
      connection.close();
      await svc.close();
    });

    it('carries 30 concurrent unary and streamed calls on one stream, in fewer messages than calls, each charged once', async () => {
      const { key, accountId } = await svc.createFundedKey(1_000_000);
      const before = connection.tunnelStats!();
      // 30: under the key's limit of calls in flight (32).
      const unary = Array.from({ length: 20 }, (_, i) =>
        callCore(meta(key, `req_tunnel_u${i}`), (o) =>
          connection.clients.chat.createChatCompletion({ params }, o),
        ).then((r) => r.billing?.cost ?? -1n),
      );
      const streams = Array.from({ length: 10 }, async (_, i) => {
        let cost = -1n;
        let chunks = 0;
        for await (const m of streamCore(meta(key, `req_tunnel_s${i}`), (o) =>
          connection.clients.chat.streamChatCompletion({ params }, o),
        )) {
          if (m.chunk !== undefined) chunks += 1;
          if (m.billing !== undefined) cost = m.billing.cost;
        }
        assert.ok(chunks > 2, `stream ${i}: ${chunks} chunks`);
        return cost;
      });
      const costs = await Promise.all([...unary, ...streams]);
      assert.ok(costs.every((c) => c > 0n));
      const after = connection.tunnelStats!();
      assert.equal(after.opened, 1, 'one tunnel carried them all');
      assert.equal(after.calls - before.calls, 30);
      assert.equal(after.direct, 0);
      // Frames made ready in one turn of the loop leave together: far fewer messages than calls.
      assert.ok(after.writes - before.writes < 30, `gateway wrote ${after.writes - before.writes} messages`);
      const spent = costs.reduce((a, b) => a + b, 0n);
      const wallet = await svc.wallet(accountId);
      assert.equal(wallet.balance, 1_000_000n - spent);
      assert.equal(wallet.held, 0n);
      const charges = (await svc.ledger(accountId, 200)).filter((e) => e.kind === 'charge');
      assert.equal(charges.length, 30);
    });

    it('answers failures with the core’s codes and trailers, as a call of its own does', async () => {
      const direct = connectCore(svc.coreAddress, { tunnels: 0 });
      try {
        const failure = async (c: CoreConnection, key: string): Promise<SvcError> => {
          const error = await callCore(meta(key, 'req_tunnel_bad'), (o) =>
            c.clients.chat.createChatCompletion({ params }, o),
          ).then(
            () => undefined,
            (e: unknown) => e,
          );
          assert.ok(error instanceof SvcError, String(error));
          return error;
        };
        const { key: poor } = await svc.createFundedKey(0);
        for (const key of ['svc_sk_not_a_real_key', poor]) {
          const viaTunnel = await failure(connection, key);
          const viaCall = await failure(direct, key);
          assert.equal(viaTunnel.code, viaCall.code);
          assert.equal(viaTunnel.message, viaCall.message);
        }
        const streamed = await (async () => {
          for await (const m of streamCore(meta('svc_sk_not_a_real_key', 'req_tunnel_bad_s'), (o) =>
            connection.clients.chat.streamChatCompletion({ params }, o),
          ))
            void m;
        })().then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(streamed instanceof SvcError);
        assert.equal(streamed.code, 'invalid_api_key');
      } finally {
        direct.close();
      }
    });

    it('cuts large batches: 30 calls of 2.5 MB each in one turn (75 MB, past gRPC’s 64 MiB message) all answered', async () => {
      const big = { ...params, messages: [{ role: ChatRole.CHAT_ROLE_USER, content: 'x'.repeat(2_500_000) }] };
      const before = connection.tunnelStats!();
      const errors = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          callCore(meta('svc_sk_not_a_real_key', `req_big_${i}`), (o) =>
            connection.clients.chat.createChatCompletion({ params: big }, o),
          ).then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      );
      // Each call reached the core and was refused there, none lost with the tunnel.
      assert.deepEqual(
        errors.map((e) => (e instanceof SvcError ? e.code : String(e))),
        Array.from({ length: 30 }, () => 'invalid_api_key'),
      );
      const after = connection.tunnelStats!();
      assert.equal(after.opened, before.opened, 'the tunnel held');
      assert.ok(after.writes - before.writes >= 2, `${after.writes - before.writes} messages`);
    });

    it('rotates: a tunnel past its age takes no new call and closes, and calls go on in a new one', async () => {
      const rotating = connectCore(svc.coreAddress, { tunnels: 1, tunnelMaxAgeMs: 30 });
      try {
        const { key } = await svc.createFundedKey(100_000);
        for (let i = 0; i < 4; i += 1) {
          const r = await callCore(meta(key, `req_rot_${i}`), (o) =>
            rotating.clients.chat.createChatCompletion({ params }, o),
          );
          assert.ok((r.billing?.cost ?? 0n) > 0n);
          await new Promise((resolve) => setTimeout(resolve, 40));
        }
        assert.equal(rotating.tunnelStats!().opened, 4);
      } finally {
        rotating.close();
      }
    });
  });

  describe('with an upstream that streams slowly', () => {
    let fx: OpenAiFixture;
    let connection: CoreConnection;

    before(async () => {
      fx = await startOpenAiFixture();
      connection = connectCore(fx.svc.coreAddress, { tunnels: 1 });
    });
    after(async () => {
      connection.close();
      await fx.close();
    });

    it('a caller that cancels a stream cancels the core’s call: the upstream request is dropped and nothing is held', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      let resume = (): void => undefined;
      fx.upstream.enqueue({ kind: 'slow', afterPieces: 2, resume: new Promise<void>((r) => (resume = r)) });
      const controller = new AbortController();
      const abortedBefore = fx.upstream.aborted;
      const seen: unknown[] = [];
      const run = (async () => {
        for await (const m of streamCore(meta(key, 'req_tunnel_cancel', controller.signal), (o) =>
          connection.clients.chat.streamChatCompletion({ params }, o),
        )) {
          seen.push(m);
          if (seen.length === 1) controller.abort();
        }
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      const error = await run;
      assert.ok(error instanceof SvcError && error.code === 'cancelled', String(error));
      await until(
        () => fx.upstream.aborted,
        (n) => n > abortedBefore,
      );
      resume();
      const settled = await fx.settled(accountId);
      assert.equal(settled.held, 0n);
      // The client left after the first piece: it pays at most what it received.
      assert.ok(settled.balance <= 1_000_000n);
    });
  });

  describe('against a core without TunnelService (an older core)', () => {
    let server: Server;
    let connection: CoreConnection;

    before(async () => {
      server = createServer();
      // Every method but ListModels unimplemented, as a core of another version might be.
      const implementation: Record<string, () => Promise<unknown>> = {};
      for (const key of Object.keys(ModelServiceDefinition.methods))
        implementation[key] = () => Promise.reject(new ServerError(Status.UNIMPLEMENTED, 'not here'));
      implementation['listModels'] = () =>
        Promise.resolve(ListModelsResponse.fromPartial({ models: [{ id: 'old-core-model' }] }));
      server.add(ModelServiceDefinition, implementation as never);
      const port = await server.listen('127.0.0.1:0');
      connection = connectCore(`127.0.0.1:${port}`, { tunnels: 2 });
    });
    after(async () => {
      connection.close();
      await server.shutdown();
    });

    it('makes the calls it sent, and every later one, directly', async () => {
      const metadata = new Metadata({ authorization: 'Bearer svc_sk_x' });
      const first = await Promise.all(
        Array.from({ length: 3 }, () => connection.clients.models.listModels({}, { metadata })),
      );
      assert.deepEqual(
        first.map((r) => r.models.map((m) => m.id)),
        [['old-core-model'], ['old-core-model'], ['old-core-model']],
      );
      const later = await connection.clients.models.listModels({}, { metadata });
      assert.deepEqual(
        later.models.map((m) => m.id),
        ['old-core-model'],
      );
      const stats = connection.tunnelStats!();
      assert.equal(stats.direct, 4);
    });
  });
});
