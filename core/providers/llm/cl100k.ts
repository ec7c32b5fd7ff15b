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
const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function loadRanks(): (string | number[])[] {
  const text = fs.readFileSync(require.resolve('gpt-tokenizer/data/cl100k_base.tiktoken'), 'latin1');
  // Each token is decoded into one reused buffer (no Buffer, no substring per line): start-up then
  // allocates little besides the ranks themselves.
  const value = new Int16Array(128).fill(-1);
  for (let i = 0; i < BASE64.length; i++) value[BASE64.charCodeAt(i)] = i;
  const bytes = Buffer.alloc(1024);
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const ranks: (string | number[])[] = [];
  for (let start = 0; start < text.length; ) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const space = text.indexOf(' ', start);
    if (space > start && space < end) {
      let rank = 0;
      for (let i = space + 1; i < end; i++) rank = rank * 10 + text.charCodeAt(i) - 48;
      if (rank !== ranks.length) throw new Error(`cl100k_base.tiktoken: rank ${rank} at line ${ranks.length + 1}`);
      let n = 0;
      let bits = 0;
      let acc = 0;
      let ascii = true;
      for (let i = start; i < space; i++) {
        const c = text.charCodeAt(i);
        if (c === 61) break; // '=' padding
        const v = c < 128 ? (value[c] ?? -1) : -1;
        if (v < 0) throw new Error(`cl100k_base.tiktoken: not base64 at line ${ranks.length + 1}`);
        acc = ((acc << 6) | v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          const b = (acc >> bits) & 0xff;
          if (b >= 0x80) ascii = false;
          bytes[n++] = b;
        }
      }
      if (ascii) ranks.push(bytes.toString('latin1', 0, n));
      else {
        const token = bytes.subarray(0, n);
        let decoded: string | undefined;
        try {
          decoded = utf8.decode(token);
        } catch {
          decoded = undefined;
        }
        // Decoding drops a leading byte-order mark: the package keeps such a token as bytes.
        ranks.push(decoded !== undefined && Buffer.byteLength(decoded) === n ? decoded : [...token]);
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
