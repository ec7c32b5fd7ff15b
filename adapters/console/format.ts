const NUMBER = new Intl.NumberFormat('en-US');

/** 1234567n → "1,234,567". */
export function groupDigits(value: bigint | number): string {
  return NUMBER.format(value);
}

export function toman(value: bigint): string {
  return `${groupDigits(value)} toman`;
}

/** "2026-11-22 05:01 UTC": the console shows one time zone, the one the ledger uses. */
export function utc(date: Date | undefined | null): string {
  if (date === undefined || date === null) return '—';
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** "3 min ago", "2 h ago", "5 days ago" for recent times, the date otherwise. */
export function ago(date: Date | undefined | null, now: number): string {
  if (date === undefined || date === null) return 'never';
  const seconds = Math.max(0, Math.round((now - date.getTime()) / 1000));
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  if (seconds < 30 * 86_400) return `${Math.floor(seconds / 86_400)} days ago`;
  return date.toISOString().slice(0, 10);
}

const ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve',
  'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen'];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];
const SCALES = ['', 'thousand', 'million', 'billion', 'trillion', 'quadrillion'];

function belowThousand(n: number): string {
  const hundreds = Math.floor(n / 100);
  const rest = n % 100;
  const parts: string[] = [];
  if (hundreds > 0) parts.push(`${ONES[hundreds] ?? ''} hundred`);
  if (rest >= 20) parts.push(rest % 10 === 0 ? (TENS[rest / 10] ?? '') : `${TENS[Math.floor(rest / 10)] ?? ''}-${ONES[rest % 10] ?? ''}`);
  else if (rest > 0) parts.push(ONES[rest] ?? '');
  return parts.join(' ');
}

/** 1250000n → "one million two hundred fifty thousand": an amount read back before money moves. */
export function inWords(value: bigint): string {
  if (value === 0n) return 'zero';
  if (value < 0n) return `minus ${inWords(-value)}`;
  const groups: string[] = [];
  let rest = value;
  for (let scale = 0; rest > 0n; scale++) {
    const group = Number(rest % 1000n);
    rest /= 1000n;
    if (group > 0) groups.unshift(`${belowThousand(group)}${SCALES[scale] === '' ? '' : ` ${SCALES[scale] ?? ''}`}`);
  }
  return groups.join(' ');
}
