import assert from 'node:assert/strict';
import type { CallContext, ServerMiddlewareCall } from 'nice-grpc-common';
import { cloneMessage } from '../../core/server/clone';
import { createInProcessChannel } from '../../core/server/in-process';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';

describe('in-process channel: messages are copied at the boundary', () => {
  it('cloneMessage copies as deep as structuredClone, keeping byte arrays, buffers and dates', () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const buffer = Buffer.from('abc');
    const when = new Date(1_700_000_000_000);
    const original = {
      a: 1,
      big: 12n,
      nested: { list: [{ x: 'y' }, 2, null], none: undefined },
      bytes,
      buffer,
      when,
      map: new Map([['k', { v: 1 }]]),
    };
    const copy = cloneMessage(original);
    // As structuredClone copies it, but for a Buffer, which stays a Buffer (structuredClone
    // makes it a plain Uint8Array).
    const { buffer: copiedBuffer, ...copiedRest } = copy;
    const { buffer: _buffer, ...originalRest } = original;
    assert.deepEqual(copiedRest, structuredClone(originalRest));
    assert.ok(Buffer.isBuffer(copiedBuffer) && copiedBuffer !== buffer);
    assert.ok(copy.bytes instanceof Uint8Array && !Buffer.isBuffer(copy.bytes));
    assert.ok('none' in copy.nested);
    // Nothing is shared: changing the original anywhere leaves the copy as it was.
    original.nested.list[0] = { x: 'changed' };
    (original.nested.list as unknown[]).push(3);
    bytes[0] = 9;
    buffer[0] = 0;
    when.setTime(0);
    original.map.get('k')!.v = 2;
    assert.deepEqual(copy.nested.list, [{ x: 'y' }, 2, null]);
    assert.equal(copy.bytes[0], 1);
    assert.equal(copy.buffer.toString(), 'abc');
    assert.equal(copy.when.getTime(), 1_700_000_000_000);
    assert.equal(copy.map.get('k')!.v, 1);
  });

  it('neither the caller nor the service sees the other change a message after the call', async () => {
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
