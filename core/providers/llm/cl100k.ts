import fs from 'node:fs';
import { GptEncoding } from 'gpt-tokenizer/cjs/GptEncoding';

/*
 * cl100k_base, the tokenizer of the hold bound and of usage estimates (./tokens.ts), built from the
 * package's own `data/cl100k_base.tiktoken` (tiktoken's format: one base64 token and its rank per
 * line) instead of `gpt-tokenizer/cjs/encoding/cl100k_base`. That module's ranks are a 1.2 MB
 * JavaScript array literal: V8 parses and compiles it, keeps its source text in the heap for good,
 * and the parser's work memory stays in the malloc heap afterwards: ~35 MiB of RSS for 7.5 MiB of
 * tables. Read as data, the same ranks cost ~20 MiB less (docs/performance.md, "Memory, round four").
 * The array is the package's, element for element: a token that is valid UTF-8 (and does not
 * start with a byte-order mark, which decoding would drop) is its string, any other its bytes;
 * `test/providers/cl100k.test.ts` compares the two.
 */
function loadRanks(): (string | number[])[] {
  const text = fs.readFileSync(require.resolve('gpt-tokenizer/data/cl100k_base.tiktoken'), 'latin1');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const ranks: (string | number[])[] = [];
  for (let start = 0; start < text.length;) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const space = text.indexOf(' ', start);
    if (space > start && space < end) {
      const rank = Number(text.slice(space + 1, end));
      if (rank !== ranks.length) throw new Error(`cl100k_base.tiktoken: rank ${rank} at line ${ranks.length + 1}`);
      const bytes = Buffer.from(text.slice(start, space), 'base64');
      let ascii = true;
      for (const b of bytes) if (b >= 0x80) ascii = false;
      if (ascii) ranks.push(bytes.toString('latin1'));
      else {
        let token: string | undefined;
        try {
          token = utf8.decode(bytes);
        } catch {
          token = undefined;
        }
        // Decoding drops a leading byte-order mark: the package keeps such a token as bytes.
        ranks.push(token !== undefined && Buffer.byteLength(token) === bytes.length ? token : [...bytes]);
      }
    }
    start = end + 1;
  }
  return ranks;
}

const encoding = GptEncoding.getEncodingApi('cl100k_base', loadRanks);

export const countTokens = encoding.countTokens.bind(encoding);
export const decode = encoding.decode.bind(encoding);
/** The ranks as built above, for the test that compares them with the package's own module. */
export const cl100kRanks = (): readonly (string | readonly number[])[] => loadRanks();
