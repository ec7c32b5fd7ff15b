import assert from 'node:assert/strict';
import { countTokensLinear } from '../../core/providers/llm/tokens';

// countTokensLinear counts a run of more than 256 spaces or non-spaces in slices, adding
// `perSlice` tokens per slice: what it takes for a long run must be exactly what `\s` and `\S`
// take in a regular expression (the test was one before it became a scan).
describe('the hold bound finds long runs as \\s{257,} and \\S{257,} do', () => {
  const LONG = /(\S{257,}|\s{257,})/;
  // Every kind of space \s matches, its neighbours, a lone surrogate and plain letters.
  const codes = [
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x1f, 0x20, 0x21, 0x61, 0x85, 0x9f, 0xa0, 0xa1, 0x1680, 0x1681, 0x1fff,
    0x2000, 0x2005, 0x200a, 0x200b, 0x2027, 0x2028, 0x2029, 0x202a, 0x202f, 0x205f, 0x2060, 0x3000, 0x3001, 0xd83d,
    0xfeff, 0xfffd,
  ];
  const sliced = (text: string): boolean =>
    countTokensLinear(text, Infinity, 1) !== countTokensLinear(text, Infinity, 0);

  it('a run of one character, 256 and 257 long, alone and between the other kind', () => {
    for (const code of codes) {
      const c = String.fromCharCode(code);
      const other = /\s/.test(c) ? 'x' : ' ';
      for (const text of [
        c.repeat(256),
        c.repeat(257),
        `${other}${c.repeat(257)}${other}`,
        `${c.repeat(128)}${other}${c.repeat(128)}`,
      ])
        assert.equal(sliced(text), LONG.test(text), `U+${code.toString(16)} × ${text.length}`);
    }
  });

  it('runs mixing kinds of space, and of non-space', () => {
    const spaces = ' \t\u00a0\u2003\u3000\ufeff';
    const letters = 'aé\u4e2d\ud83d\ude00-';
    for (const [alphabet, length] of [
      [spaces, 256],
      [spaces, 257],
      [letters, 256],
      [letters, 257],
    ] as const) {
      let text = '';
      while (text.length < length) text += alphabet[text.length % alphabet.length];
      text = text.slice(0, length);
      assert.equal(sliced(text), LONG.test(text), `${JSON.stringify(alphabet)} × ${length}`);
    }
  });
});
