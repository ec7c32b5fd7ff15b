import assert from 'node:assert/strict';
import { withMembers } from '../../core/providers/llm/pass-through-text';

/*
 * The fast path's member edits (core/providers/llm/pass-through-text.ts `withMembers`): the members
 * named are set where the text writes them, added after the last one where it does not, and
 * everything else keeps the upstream's bytes; a key written twice or escaped refuses the edit
 * (the caller then writes the JSON again).
 */
describe('pass-through text: withMembers', function () {
  it('replaces members where they are written, spacing and the rest kept', function () {
    const text = '{"a": 1.50, "id" : "x",\n "nested": {"id": "y"}, "store": false}';
    const out = withMembers(text, 0, { id: '"z"', store: 'true' });
    assert.deepEqual(out, { text: '{"a": 1.50, "id" : "z",\n "nested": {"id": "y"}, "store": true}', end: 62 });
    assert.equal(out.text.length, out.end);
  });

  it('adds a missing member after the last one (or into an empty object), and edits a value by a function', function () {
    assert.equal(withMembers('{"a":1}', 0, { b: '2' })?.text, '{"a":1,"b":2}');
    assert.equal(withMembers('{ }', 0, { b: '2', c: '3' })?.text, '{ "b":2,"c":3}');
    const usage = '{"usage": {"input_tokens": 3} , "x": "}"}';
    assert.equal(
      withMembers(usage, 0, { usage: (v) => withMembers(v, 0, { cost: '7' })?.text })?.text,
      '{"usage": {"input_tokens": 3,"cost":7} , "x": "}"}',
    );
  });

  it('edits the object that opens at an offset, and says where it ends', function () {
    const text = '{"type":"t","response":{"id":"a"},"z":1}';
    const out = withMembers(text, text.indexOf('{', 1), { id: '"bb"' });
    assert.equal(out?.text, '{"type":"t","response":{"id":"bb"},"z":1}');
    assert.equal(out?.text.charAt((out?.end ?? 0) - 1), '}');
  });

  it('refuses a key written twice or escaped, and a function edit that refuses', function () {
    assert.equal(withMembers('{"id":"a","id":"b"}', 0, { id: '"c"' }), undefined);
    assert.equal(withMembers('{"\\u0069d":"a"}', 0, { id: '"c"' }), undefined);
    assert.equal(withMembers('{"u":{}}', 0, { u: () => undefined }), undefined);
    assert.equal(withMembers('{"a":1}', 0, { u: () => '1' }), undefined);
  });
});
