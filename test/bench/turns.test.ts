import assert from 'node:assert/strict';
import type http from 'node:http';
import { driveTurns, mergeTurns, type TurnsMode } from '../../bench/lib/turns';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';

type Json = Record<string, unknown>;

// The bench's conversation client (bench/lib/turns.ts, the responses-ws scenario) against a real
// svc: what its numbers rest on must count right, and each mode must be the transport it says.
describe('bench: the Responses turns client (HTTP SSE and WebSocket)', function () {
  this.timeout(60_000);
  let fx: OpenAiFixture;
  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx?.close();
  });
  beforeEach(() => fx.upstream.reset());

  for (const mode of ['http-previous', 'ws', 'http-replay'] as TurnsMode[]) {
    it(`${mode}: every turn counted once, later turns continue the conversation, one charge per turn`, async () => {
      const { key, accountId } = await fx.fund(1_000_000_000);
      const upgrades: string[] = [];
      const posts: string[] = [];
      const onUpgrade = (req: http.IncomingMessage): void => void upgrades.push(String(req.url));
      const onRequest = (req: http.IncomingMessage): void => void posts.push(`${req.method} ${req.url}`);
      fx.svc.server.on('upgrade', onUpgrade);
      // First, before the gateway's own listener (its mounts rewrite req.url).
      fx.svc.server.prependListener('request', onRequest);
      let r;
      try {
        r = await driveTurns({
          baseUrl: fx.baseURL,
          key,
          model: 'svc-pro',
          mode,
          sessions: 2,
          turns: 3,
          // Four conversations of three turns, however long they take: a 300 ms window ran one
          // turn per session on a loaded machine (none continued), and over 100 on a quiet one.
          conversations: 4,
          durationMs: 60_000,
          warmupMs: 0,
        });
      } finally {
        fx.svc.server.off('upgrade', onUpgrade);
        fx.svc.server.off('request', onRequest);
      }
      assert.equal(r.errors, 0, r.firstError ?? '');
      assert.equal(r.ok, 4 * 3, 'every turn of the four conversations counted');
      assert.ok(r.ok >= 2, `${r.ok} turns`);
      assert.ok(r.continued >= 1 && r.continued < r.ok, `${r.continued} of ${r.ok} continued`);
      assert.equal(r.samples.latency.length, r.ok);
      assert.ok(r.firstEvent.p50 <= r.latency.p50);
      // Each turn reached the upstream once, and a continued one carried the conversation before it.
      assert.equal(fx.upstream.requests.length, r.ok);
      const users = fx.upstream.requests.map(
        (q) => (q.body['messages'] as Json[]).filter((m) => m['role'] === 'user').length,
      );
      assert.equal(users.filter((n) => n > 1).length, r.continued, `user messages per request: ${users.join()}`);
      if (mode === 'ws') {
        assert.equal(posts.length, 0, 'no HTTP request in WebSocket mode');
        assert.equal(upgrades.length, r.connect?.count);
        assert.ok(upgrades.length >= 2 && upgrades.every((u) => u === '/v1/openai/responses'));
      } else {
        assert.equal(upgrades.length, 0);
        assert.equal(r.connect, null);
        assert.equal(posts.filter((p) => p === 'POST /v1/openai/responses').length, r.ok, posts.join());
      }
      // The whole ledger, read at once: the harness's default reads the newest 100 entries, and a
      // quick machine runs more turns than that in the window (then 100 charges, and more turns).
      // Its oldest entry is the funding, so nothing older was cut off.
      const ledger = await fx.svc.ledger(accountId, 1000);
      assert.ok(ledger.length < 1000 && ledger.at(-1)?.kind === 'topup', `${ledger.length} ledger entries`);
      const charges = ledger.filter((e) => e.kind === 'charge');
      assert.equal(charges.length, r.ok);
      const price = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
      assert.ok(charges.every((c) => c.amount === -price));

      const twice = mergeTurns([r, r]);
      assert.equal(twice.ok, 2 * r.ok);
      assert.equal(twice.turnsPerSecond, r.turnsPerSecond);
      assert.equal(twice.latency.p50, r.latency.p50);
    });
  }
});
