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
