import assert from 'node:assert/strict';
import * as pkg from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import pkgRanks from 'gpt-tokenizer/cjs/bpeRanks/cl100k_base';
import { cl100kRanks, countTokens, decode } from '../../core/providers/llm/cl100k';

// svc builds cl100k_base from the package's tiktoken data file instead of its 1.2 MB JavaScript
// module (memory: docs/performance.md, "Memory, round four"); the tokenizer must be the package's.
describe('cl100k_base read from the tiktoken file', () => {
  it('has the package’s ranks, element for element (strings where it has strings, bytes where bytes)', () => {
    const ours = cl100kRanks();
    assert.equal(ours.length, pkgRanks.length);
    let bytesTokens = 0;
    for (let i = 0; i < pkgRanks.length; i++) {
      const theirs = pkgRanks[i];
      if (typeof theirs === 'string') assert.equal(ours[i], theirs, `rank ${i}`);
      else {
        bytesTokens += 1;
        assert.deepEqual(ours[i], [...(theirs ?? [])], `rank ${i}`);
      }
    }
    // The package keeps the byte-order-mark tokens and the invalid UTF-8 ones as bytes.
    assert.ok(bytesTokens > 8, `${bytesTokens} byte tokens`);
  });

  it('counts and decodes as the package does', () => {
    const samples = [
      'Hello, world! How are you today?',
      'naïve café — 日本語のテキスト, 中文文本, русский текст, emoji 👩‍👩‍👧‍👦 🚀',
      '\uFEFFusing System;\n// comment\n#include <stdio.h>',
      JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(300) }] }),
      '    indented\n\n\tcode(){ return a+b; }  ',
    ];
    for (const text of samples) {
      assert.equal(countTokens(text), pkg.countTokens(text), text);
      const tokens = pkg.encode(text);
      assert.equal(decode(tokens), pkg.decode(tokens), text);
      assert.equal(decode(tokens), text);
    }
  });
});
