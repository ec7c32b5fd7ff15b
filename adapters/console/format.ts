import type { Locale } from './i18n';

const NUMBER = new Intl.NumberFormat('en-US');
const NUMBER_FA = new Intl.NumberFormat('fa-IR');

/** 1234567n → "1,234,567": English digits and commas, for machine-read places (CSV, form values). */
export function groupDigits(value: bigint | number): string {
  return NUMBER.format(value);
}

/** A number as the reader's language writes it: "1,234,567" or "۱٬۲۳۴٬۵۶۷". */
export function num(locale: Locale, value: bigint | number): string {
  return (locale === 'fa' ? NUMBER_FA : NUMBER).format(value);
}

export function toman(value: bigint, locale: Locale = 'en'): string {
  return locale === 'fa' ? `${num(locale, value)} تومان` : `${num(locale, value)} toman`;
}

// Both languages show Tehran time, the time of the people who use the console; Persian in the
// Jalali calendar, English in the Gregorian one.
const WHEN_EN = new Intl.DateTimeFormat('en-CA', {
  timeZone: 'Asia/Tehran',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
});
const WHEN_FA = new Intl.DateTimeFormat('fa-IR-u-ca-persian', {
  timeZone: 'Asia/Tehran',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
});
const DAY_FA = new Intl.DateTimeFormat('fa-IR-u-ca-persian', {
  timeZone: 'Asia/Tehran',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
});

function partsOf(format: Intl.DateTimeFormat, date: Date): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of format.formatToParts(date)) out[p.type] = p.value;
  return out;
}

/** "2026-11-22 08:31" (Gregorian) or "۱۴۰۵/۰۹/۰۱ ۰۸:۳۱" (Jalali), both Tehran time; "—" for none. */
export function when(locale: Locale, date: Date | undefined | null): string {
  if (date === undefined || date === null) return '—';
  if (locale === 'fa') {
    const p = partsOf(WHEN_FA, date);
    return `${p['year'] ?? ''}/${p['month'] ?? ''}/${p['day'] ?? ''} ${p['hour'] ?? ''}:${p['minute'] ?? ''}`;
  }
  const p = partsOf(WHEN_EN, date);
  return `${p['year'] ?? ''}-${p['month'] ?? ''}-${p['day'] ?? ''} ${p['hour'] ?? ''}:${p['minute'] ?? ''}`;
}

/** The day alone: "2026-11-22" or "۱۴۰۵/۰۹/۰۱", Tehran time. */
export function day(locale: Locale, date: Date): string {
  if (locale === 'fa') {
    const p = partsOf(DAY_FA, date);
    return `${p['year'] ?? ''}/${p['month'] ?? ''}/${p['day'] ?? ''}`;
  }
  return when(locale, date).slice(0, 10);
}

const CALENDAR_FA = new Intl.DateTimeFormat('fa-IR-u-ca-persian', {
  timeZone: 'UTC',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
});

/** A calendar day given as `YYYY-MM-DD` (a UTC day of the usage totals), in the reader's calendar. */
export function calendarDay(locale: Locale, isoDay: string): string {
  if (locale !== 'fa') return isoDay;
  const at = Date.parse(`${isoDay}T00:00:00Z`);
  if (!Number.isFinite(at)) return isoDay;
  const p = partsOf(CALENDAR_FA, new Date(at));
  return `${p['year'] ?? ''}/${p['month'] ?? ''}/${p['day'] ?? ''}`;
}

/** "2026-11-22 05:01 UTC": the ledger's own time, for machine-read places (CSV). */
export function utc(date: Date | undefined | null): string {
  if (date === undefined || date === null) return '—';
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** "3 min ago", "2 h ago", "5 days ago" for recent times, the date otherwise. */
export function ago(date: Date | undefined | null, now: number, locale: Locale = 'en'): string {
  const fa = locale === 'fa';
  if (date === undefined || date === null) return fa ? 'هرگز' : 'never';
  const seconds = Math.max(0, Math.round((now - date.getTime()) / 1000));
  if (seconds < 60) return fa ? 'همین حالا' : 'just now';
  const n = (v: number): string => num(locale, v);
  if (seconds < 3600) return fa ? `${n(Math.floor(seconds / 60))} دقیقه پیش` : `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return fa ? `${n(Math.floor(seconds / 3600))} ساعت پیش` : `${Math.floor(seconds / 3600)} h ago`;
  if (seconds < 30 * 86_400)
    return fa ? `${n(Math.floor(seconds / 86_400))} روز پیش` : `${Math.floor(seconds / 86_400)} days ago`;
  return day(locale, date);
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

const FA_ONES = ['صفر', 'یک', 'دو', 'سه', 'چهار', 'پنج', 'شش', 'هفت', 'هشت', 'نه', 'ده', 'یازده', 'دوازده', 'سیزده',
  'چهارده', 'پانزده', 'شانزده', 'هفده', 'هجده', 'نوزده'];
const FA_TENS = ['', '', 'بیست', 'سی', 'چهل', 'پنجاه', 'شصت', 'هفتاد', 'هشتاد', 'نود'];
const FA_HUNDREDS = ['', 'صد', 'دویست', 'سیصد', 'چهارصد', 'پانصد', 'ششصد', 'هفتصد', 'هشتصد', 'نهصد'];
const FA_SCALES = ['', 'هزار', 'میلیون', 'میلیارد', 'هزار میلیارد', 'میلیون میلیارد'];

function faBelowThousand(n: number): string {
  const parts: string[] = [];
  const rest = n % 100;
  if (n >= 100) parts.push(FA_HUNDREDS[Math.floor(n / 100)] ?? '');
  if (rest >= 20) {
    parts.push(FA_TENS[Math.floor(rest / 10)] ?? '');
    if (rest % 10 > 0) parts.push(FA_ONES[rest % 10] ?? '');
  } else if (rest > 0) parts.push(FA_ONES[rest] ?? '');
  return parts.join(' و ');
}

/** 1250000n → "یک میلیون و دویست و پنجاه هزار". */
function faInWords(value: bigint): string {
  if (value === 0n) return FA_ONES[0] ?? '';
  if (value < 0n) return `منفی ${faInWords(-value)}`;
  const groups: string[] = [];
  let rest = value;
  for (let scale = 0; rest > 0n; scale++) {
    const group = Number(rest % 1000n);
    rest /= 1000n;
    if (group > 0) groups.unshift(`${faBelowThousand(group)}${SCALES[scale] === '' ? '' : ` ${FA_SCALES[scale] ?? ''}`}`);
  }
  return groups.join(' و ');
}

/** 1250000n → "one million two hundred fifty thousand": an amount read back before money moves. */
export function inWords(value: bigint, locale: Locale = 'en'): string {
  if (locale === 'fa') return faInWords(value);
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
