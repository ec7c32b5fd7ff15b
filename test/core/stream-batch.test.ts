import assert from 'node:assert/strict';
import { mergedChunks } from '../../core/chat/grpc';
import { batches } from '../../core/chat/stream-batch';
import { ChatCompletionChunk, type StreamChatCompletionResponse } from '../../gen/svc/core/v1/chat';
import { Billing } from '../../gen/svc/core/v1/common';

/** A source whose items the test releases by hand, recording how far it was read and whether it ended. */
function controlled<T>(): {
  source: AsyncIterable<T>;
  push(item: T): void;
  fail(error: Error): void;
  end(): void;
  readonly reads: number;
  readonly returned: boolean;
} {
  const ready: IteratorResult<T>[] = [];
  let failure: Error | undefined;
  let waiting: (() => void) | undefined;
  let reads = 0;
  let returned = false;
  const wake = (): void => {
    const w = waiting;
    waiting = undefined;
    w?.();
  };
  async function* generate(): AsyncGenerator<T> {
    try {
      for (;;) {
        reads++;
        while (ready.length === 0 && failure === undefined) await new Promise<void>((r) => (waiting = r));
        const next = ready.shift();
        if (next === undefined) throw failure;
        if (next.done === true) return;
        yield next.value;
      }
    } finally {
      returned = true;
    }
  }
  return {
    source: generate(),
    push: (item) => {
      ready.push({ done: false, value: item });
      wake();
    },
    fail: (error) => {
      failure = error;
      wake();
    },
    end: () => {
      ready.push({ done: true, value: undefined });
      wake();
    },
    get reads() {
      return reads;
    },
    get returned() {
      return returned;
    },
  };
}

/** Until every timer-free callback queued so far has run (microtasks, nextTicks, immediates). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('stream batches (several stream items per gRPC message)', function () {
  it('hands on a lone item at once and joins the items that were ready together, in order', async function () {
    const c = controlled<number>();
    const it = batches(c.source);
    const first = it.next();
    c.push(1);
    assert.deepEqual(await first, { done: false, value: [1] });
    // Three items ready before the consumer asks again: one batch.
    c.push(2);
    c.push(3);
    c.push(4);
    await settle();
    assert.deepEqual(await it.next(), { done: false, value: [2, 3, 4] });
    // A burst produced within one turn while the consumer waits leaves together too.
    const third = it.next();
    c.push(5);
    c.push(6);
    assert.deepEqual(await third, { done: false, value: [5, 6] });
    c.end();
    assert.deepEqual(await it.next(), { done: true, value: undefined });
  });

  it('passes every item of a longer stream exactly once and in order', async function () {
    async function* numbers(): AsyncGenerator<number> {
      for (let i = 0; i < 1000; i++) {
        if (i % 7 === 0) await settle();
        yield i;
      }
    }
    const seen: number[] = [];
    let messages = 0;
    for await (const batch of batches(numbers(), 16)) {
      assert.ok(batch.length >= 1 && batch.length <= 16, `a batch of ${batch.length}`);
      seen.push(...batch);
      messages++;
    }
    assert.deepEqual(
      seen,
      Array.from({ length: 1000 }, (_, i) => i),
    );
    assert.ok(messages < 1000, 'items ready together were joined');
  });

  it('reads at most `limit` items ahead of a consumer that does not ask', async function () {
    const c = controlled<number>();
    const it = batches(c.source, 4);
    const first = it.next();
    c.push(0);
    assert.deepEqual(await first, { done: false, value: [0] });
    for (let i = 1; i <= 10; i++) c.push(i);
    await settle();
    await settle();
    // The consumer has not asked: four read ahead, the fifth read waits.
    assert.equal(c.reads, 1 + 4);
    assert.deepEqual(await it.next(), { done: false, value: [1, 2, 3, 4] });
    await settle();
    assert.deepEqual(await it.next(), { done: false, value: [5, 6, 7, 8] });
    await settle();
    assert.deepEqual(await it.next(), { done: false, value: [9, 10] });
    c.end();
    assert.deepEqual(await it.next(), { done: true, value: undefined });
  });

  it("throws the source's error after the items read before it", async function () {
    const c = controlled<number>();
    const it = batches(c.source);
    const first = it.next();
    c.push(1);
    c.push(2);
    c.fail(new Error('upstream broke'));
    assert.deepEqual(await first, { done: false, value: [1, 2] });
    await assert.rejects(it.next(), /upstream broke/);
    assert.deepEqual(await it.next(), { done: true, value: undefined });
  });

  it('ends the source when the consumer leaves early, after the read in flight', async function () {
    const c = controlled<number>();
    const it = batches(c.source);
    const first = it.next();
    c.push(1);
    assert.deepEqual(await first, { done: false, value: [1] });
    await settle();
    // The pump is waiting on the source's next item; leaving must end the source once it gives it.
    const leaving = it.return(undefined);
    await settle();
    assert.equal(c.returned, false);
    c.push(2);
    await leaving;
    assert.equal(c.returned, true);
  });
});

describe('a batch of chat stream messages (core/chat/grpc.ts mergedChunks)', () => {
  const chunk = (id: string): ChatCompletionChunk => ChatCompletionChunk.fromPartial({ id });
  const billing = Billing.fromPartial({ cost: 7n });

  it('joins consecutive chunks, keeps fast-path data messages whole and in place, the billing on the end', () => {
    const batch: StreamChatCompletionResponse[] = [
      { chunk: chunk('a'), chunks: [], data: [], dataEvents: [] },
      { chunk: chunk('b'), chunks: [], data: [], dataEvents: [] },
      { chunks: [], data: ['{"id":"c"}', '{"id":"d"}'], dataEvents: [] },
      { chunk: chunk('e'), chunks: [], data: ['{"id":"before-e"}'], dataEvents: [] },
      { chunk: chunk('f'), chunks: [], data: [], dataEvents: [] },
      { chunk: chunk('final'), billing, chunks: [], data: [], dataEvents: [] },
    ];
    const out = [...mergedChunks(batch)];
    assert.deepEqual(
      out.map((m) => ({
        chunk: m.chunk?.id,
        chunks: m.chunks.map((c) => c.id),
        data: m.data,
        billed: m.billing !== undefined,
      })),
      [
        { chunk: undefined, chunks: ['a', 'b'], data: [], billed: false },
        { chunk: undefined, chunks: [], data: ['{"id":"c"}', '{"id":"d"}'], billed: false },
        { chunk: 'e', chunks: [], data: ['{"id":"before-e"}'], billed: false },
        { chunk: undefined, chunks: ['f', 'final'], data: [], billed: true },
      ],
    );
  });
});
