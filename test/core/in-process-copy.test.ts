import assert from 'node:assert/strict';
import type { CallContext, ServerMiddlewareCall } from 'nice-grpc-common';
import { copyMessage, createInProcessChannel } from '../../core/server/in-process';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';

// The in-process channel copies every message at the boundary: the copy must be as deep and as
// faithful as the structuredClone it replaces, whatever a ts-proto message holds.
describe('in-process channel: copyMessage', function () {
  it('copies plain objects, arrays, bigints, dates and bytes deeply, sharing nothing', function () {
    const created = new Date(1_700_000_000_000);
    const message = {
      chunk: {
        id: 'chatcmpl-1',
        created: 1_700_000_000n,
        choices: [{ index: 0, delta: { content: 'hi', toolCalls: [] as unknown[] }, finishReason: '' }],
        usage: undefined,
        nested: { at: created, bytes: Buffer.from('abc'), list: [1, 'two', null, false, [3n]] },
      },
      billing: undefined,
    };
    const copy = copyMessage(message);
    assert.deepEqual(copy, structuredClone(message));
    assert.notEqual(copy, message);
    assert.notEqual(copy.chunk, message.chunk);
    assert.notEqual(copy.chunk.choices, message.chunk.choices);
    assert.notEqual(copy.chunk.choices[0], message.chunk.choices[0]);
    assert.notEqual(copy.chunk.choices[0]!.delta, message.chunk.choices[0]!.delta);
    assert.notEqual(copy.chunk.nested.at, created);
    assert.equal(copy.chunk.nested.at.getTime(), created.getTime());
    assert.notEqual(copy.chunk.nested.bytes, message.chunk.nested.bytes);
    assert.deepEqual([...copy.chunk.nested.bytes], [...Buffer.from('abc')]);
    // Keys whose value is undefined stay, as structuredClone keeps them.
    assert.ok('usage' in copy.chunk && 'billing' in copy);
    // Changing the copy leaves the original as it was.
    copy.chunk.choices[0]!.delta.content = 'changed';
    copy.chunk.nested.bytes[0] = 0;
    (copy.chunk.nested.list[4] as bigint[]).push(4n);
    assert.equal(message.chunk.choices[0]!.delta.content, 'hi');
    assert.equal(message.chunk.nested.bytes[0], 'a'.charCodeAt(0));
    assert.deepEqual(message.chunk.nested.list[4], [3n]);
  });

  it('keeps an own __proto__ key (a client may send one) as a property, not as the prototype', function () {
    const args = JSON.parse('{"__proto__": {"polluted": true}, "query": "x"}') as Record<string, unknown>;
    const copy = copyMessage({ arguments: args });
    assert.deepEqual(Object.keys(copy.arguments), ['__proto__', 'query']);
    assert.equal(Object.getPrototypeOf(copy.arguments), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(copy.arguments, '__proto__')?.value, { polluted: true });
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    assert.equal((copy.arguments as { polluted?: unknown }).polluted, undefined);
  });

  it('copies objects without a prototype, and other classes as structuredClone does', function () {
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: { b: 1 } });
    const copy = copyMessage({ bare, map: new Map([['k', { v: 1 }]]) });
    assert.deepEqual(copy.bare['a'], { b: 1 });
    assert.notEqual(copy.bare['a'], bare['a']);
    assert.ok(copy.map instanceof Map);
    assert.deepEqual(copy.map.get('k'), { v: 1 });
  });

  it('refuses what structuredClone refuses, and copies cycles and deep nesting through it', function () {
    assert.throws(() => copyMessage({ f: () => 1 }), { name: 'DataCloneError' });
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic['self'] = cyclic;
    const copy = copyMessage(cyclic);
    assert.equal(copy['self'], copy);
    assert.notEqual(copy, cyclic);
    let deep: Record<string, unknown> = { leaf: true };
    for (let i = 0; i < 200; i++) deep = { next: deep };
    assert.deepEqual(copyMessage(deep), deep);
  });
});

describe('in-process channel: messages are copied at the boundary', function () {
  it('neither the caller nor the service sees the other change a message after the call', async function () {
    let seenByService: { id: string } | undefined;
    const answer = { models: [{ id: 'svc-pro', ownedBy: 'svc', contextWindow: 1000 }] };
    const implementation = {
      listModels(request: { id: string }) {
        seenByService = request;
        return Promise.resolve(answer);
      },
      getModel: () => Promise.reject(new Error('not called')),
    };
    const passThrough = async function* <Req, Res>(call: ServerMiddlewareCall<Req, Res>, context: CallContext) {
      return yield* call.next(call.request, context);
    };
    const channel = createInProcessChannel([{ definition: ModelServiceDefinition, implementation }], passThrough);
    const client = channel.client(ModelServiceDefinition) as {
      listModels(request: unknown): Promise<{ models: { id: string }[] }>;
    };
    // (The message's fields do not matter to the channel: it copies whatever crosses.)
    const request = { id: 'svc-pro' };
    const got = await client.listModels(request);
    request.id = 'changed';
    assert.equal(seenByService?.id, 'svc-pro');
    got.models[0]!.id = 'changed by the caller';
    assert.equal(answer.models[0]!.id, 'svc-pro');
    answer.models[0]!.id = 'changed by the service';
    assert.equal(got.models[0]!.id, 'changed by the caller');
  });
});
