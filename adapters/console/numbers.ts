import { SvcError } from '../../core/edge';

// Persian (U+06F0-06F9) and Arabic-Indic (U+0660-0669) digits, as phones with a Persian or Arabic
// keyboard type them, read as the ASCII digits they mean.
const FOREIGN_DIGITS = /[\u06f0-\u06f9\u0660-\u0669]/g;
// Thousand separators people type: the comma, the Arabic thousands separator (U+066C), and spaces
// (including the no-break and thin spaces that copied numbers carry). Underscores as in code.
const SEPARATORS = /[,\u066c\s\u00a0\u202f_]/g;

/** ASCII digits for Persian and Arabic-Indic ones; everything else as it was. */
export function asciiDigits(text: string): string {
  return text.replace(FOREIGN_DIGITS, (d) => String((d.codePointAt(0) ?? 0) & 0x0f));
}

/**
 * A whole, non-negative amount as a person types it: `12000`, `12,000`, `۱۲٬۰۰۰`, `١٢٠٠٠`.
 * Empty is `undefined` (the caller decides what an empty field means). Anything else (a sign,
 * a decimal point, letters, more than 16 digits) is `invalid_argument` naming the field.
 */
export function parseAmount(text: string, param: string, what: string): bigint | undefined {
  const plain = asciiDigits(text).replace(SEPARATORS, '');
  if (plain === '') return undefined;
  if (!/^\d{1,16}$/.test(plain))
    throw new SvcError('invalid_argument', `${what} must be a whole number of toman, e.g. 50,000 or ۵۰٬۰۰۰.`, {
      param,
    });
  return BigInt(plain);
}
