import assert from 'node:assert/strict';
import { latencyChart } from '../../bench/lib/chart';
import { goalsTable, judgeGoals } from '../../bench/lib/goals';
import { drive } from '../../bench/lib/loadgen';
import { chatBody, VARIANTS } from '../../bench/lib/peers';
import { startBenchUpstream } from '../../bench/lib/upstream';
import type { BenchRow } from '../../bench/types';

// The bench's own parts: what its numbers rest on must count right.
describe('bench: load client and fake upstream', () => {
  let upstream: { baseUrl: string; close(): void };
  before(async () => {
    upstream = await startBenchUpstream({ latencyMs: 0, chunks: 5 });
  });
  after(() => upstream.close());

  it('counts every data frame of each stream but [DONE], and finds the first content', async () => {
    const r = await drive({
      url: `${upstream.baseUrl}/chat/completions`,
      headers: { 'content-type': 'application/json' },
      body: chatBody('fake-0ms', true),
      concurrency: 2,
      durationMs: 200,
      warmupMs: 0,
    });
    assert.equal(r.errors, 0, r.firstError ?? '');
    assert.ok(r.ok > 0);
    // role chunk + 5 content chunks + finish chunk + usage chunk.
    assert.ok(r.chunksPerSecond !== null);
    assert.equal(Math.round((r.chunksPerSecond * r.seconds) / r.ok), 8);
    assert.ok(r.ttft !== null && r.ttft.p50 <= r.latency.p50);
  });

  it('waits the latency that the model name asks for, and counts errors apart', async () => {
    const slow = await drive({
      url: `${upstream.baseUrl}/chat/completions`,
      headers: { 'content-type': 'application/json' },
      body: chatBody('fake-40ms', false),
      rate: 50,
      durationMs: 200,
      warmupMs: 0,
    });
    assert.equal(slow.errors, 0);
    assert.ok(slow.ok > 0);
    assert.ok(slow.latency.p50 >= 40, `p50 ${slow.latency.p50}`);
    assert.equal(slow.ttft, null);
    const bad = await drive({
      url: `${upstream.baseUrl}/nowhere`,
      headers: { 'content-type': 'application/json' },
      body: chatBody('fake-0ms', false),
      concurrency: 1,
      durationMs: 50,
      warmupMs: 0,
    });
    assert.equal(bad.ok, 0);
    assert.ok(bad.errors > 0);
    assert.match(bad.firstError ?? '', /^HTTP 404/);
  });
});

describe('bench: goals and chart', () => {
  const row = (scenario: string, variant: string, metric: string, value: number, load?: number): BenchRow => ({
    scenario,
    variant,
    metric,
    value,
    unit: 'x',
    ...(load === undefined ? {} : { load }),
  });

  it('judges each goal met or short by how much, and says when a number is missing', () => {
    const fast = 'chat non-stream, upstream 0 ms, c=32';
    const goals = judgeGoals([
      row(fast, VARIANTS.proxy, 'throughput', 10_000),
      row(fast, VARIANTS.portkey, 'throughput', 1_000),
      row(fast, VARIANTS.svc, 'throughput', 2_000),
      row('chat added latency vs direct @500 req/s', VARIANTS.svc, 'added p50', 0.5),
      row('chat added latency vs direct @500 req/s', VARIANTS.svc, 'added p99', 7),
      row('memory soak 45 s at 150+50 stream req/s', VARIANTS.svc, 'RSS growth', 30),
    ]);
    const by = (prefix: string) => goals.find((g) => g.goal.startsWith(prefix));
    const portkey = by("svc ≥ 3× Portkey's throughput (chat non-stream)");
    assert.equal(portkey?.met, false);
    assert.match(portkey?.verdict ?? '', /short: 67% of the goal, needs 1\.50× more/);
    assert.equal(by("svc ≥ ½ the bare proxy's throughput (chat non-stream)")?.met, false);
    assert.equal(by('added latency p50')?.met, true);
    assert.match(by('added latency p99')?.verdict ?? '', /over by 2\.00 ms/);
    assert.equal(by('MCP tools/call')?.met, null);
    const soak = by('svc RSS does not grow');
    assert.equal(soak?.met, null);
    assert.equal(soak?.measured, '30.0 MiB');
    assert.match(soak?.verdict ?? '', /too short/);
    const long = judgeGoals([row('memory soak 600 s at 150+50 stream req/s', VARIANTS.svc, 'RSS growth', 30)]);
    assert.match(long.find((g) => g.goal.startsWith('svc RSS does not grow'))?.verdict ?? '', /over by 20\.0 MiB/);
    assert.match(goalsTable(goals), /\| added latency p50 at 500 req\/s < 1 ms \| 0\.50 ms \| \*\*met\*\* \| — \|/);
    // The RSS goal is in MB while the bench reads MiB: 144 MiB is 151.0 MB, over; 143 MiB is under.
    const rss = (mib: number) =>
      judgeGoals([row('memory at 500 req/s non-stream', VARIANTS.svc, 'RSS (max)', mib)]).find((g) =>
        g.goal.startsWith('svc RSS < 150 MB at steady load'),
      );
    assert.equal(rss(144)?.met, false);
    assert.equal(rss(143)?.met, true);
  });

  it("sets each goal beside the peers' figures of the same run, and nothing the run did not measure", () => {
    const cpu = 'CPU per answered request, upstream 0 ms, c=32';
    const added = 'chat added latency vs direct @500 req/s';
    const goals = judgeGoals([
      row('chat non-stream, upstream 0 ms, c=32', VARIANTS.svc, 'throughput', 2_000),
      row('chat non-stream, upstream 0 ms, c=32', VARIANTS.portkey, 'throughput', 1_000),
      row(cpu, VARIANTS.svc, 'non-stream', 480),
      row(cpu, VARIANTS.portkey, 'non-stream', 1_100),
      row(cpu, VARIANTS.proxy, 'stream', 150),
      row(added, VARIANTS.svc, 'added p99', 12),
      row(added, VARIANTS.portkey, 'added p99', 24.5),
      row(added, VARIANTS.proxy, 'added p99', 0.9),
      row('workers: chat non-stream, upstream 0 ms, c=32', 'svc serve --workers 1', 'throughput', 3_000),
      row('workers: chat non-stream, upstream 0 ms, c=32', VARIANTS.svcWorkers, 'throughput', 3_300),
      row('workers: chat non-stream, upstream 0 ms, c=32', 'bare passthrough proxy, 1 worker', 'throughput', 10_000),
      row('workers: chat non-stream, upstream 0 ms, c=32', VARIANTS.proxyWorkers, 'throughput', 8_000),
      row('memory at 500 req/s non-stream', VARIANTS.proxy, 'RSS (max)', 110),
    ]);
    const by = (prefix: string) => goals.find((g) => g.goal.startsWith(prefix));
    assert.equal(
      by("svc ≥ 3× Portkey's throughput (chat non-stream)")?.beside,
      'CPU per request: svc 480 µs, Portkey 1,100 µs',
    );
    assert.equal(by("svc ≥ ½ the bare proxy's throughput (chat stream)")?.beside, 'CPU per request: bare proxy 150 µs');
    assert.equal(by('added latency p99')?.beside, 'the same load through Portkey 24.5 ms, the bare proxy 0.90 ms');
    assert.equal(by('svc split: added latency p99')?.beside, 'added p99: svc serve 12.0 ms, Portkey 24.5 ms');
    assert.equal(by('svc --workers 2')?.beside, 'the bare proxy, 2 workers / 1: 0.80×');
    // 110 MiB is 115.3 MB: the goal's unit.
    assert.equal(by('svc RSS < 150 MB at steady load')?.beside, 'at the same load: the bare proxy 115 MB');
    assert.equal(by('MCP tools/call')?.beside, '');
    assert.match(
      goalsTable(goals),
      /\| MCP tools\/call through svc ≥ 2× the bare SDK server \| — \| not measured in this run \| — \|/,
    );
  });

  it('draws p50 and p99 of each variant from the rows that carry a load, and nothing without them', () => {
    assert.equal(latencyChart([row('s', 'a', 'throughput', 1)], 't'), null);
    const svg = latencyChart(
      [250, 500].flatMap((load) => [
        row(`@${load}`, 'peer <a>', 'latency p50', 61, load),
        row(`@${load}`, 'peer <a>', 'latency p99', 70, load),
        row(`@${load}`, 'peer b', 'latency p50', 65, load),
      ]),
      'title',
    );
    assert.ok(svg !== null);
    assert.match(svg, /^<svg /);
    assert.match(svg, /peer &lt;a&gt;/);
    assert.equal(svg.match(/<path /g)?.length, 3);
  });
});
