/*
 * A strict reader of the Prometheus text exposition format (0.0.4), written from the format's
 * specification so that a test fails on anything a Prometheus server would refuse: a sample
 * before its TYPE, a family split in two, bad names or escapes, non-numeric values, histogram
 * buckets that are not cumulative or lack +Inf.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad value in: ${line}`);
  return Number(text);
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`bad labels in: ${line}`);
    const name = text.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`bad label name "${name}" in: ${line}`);
    if (name in labels) throw new Error(`repeated label "${name}" in: ${line}`);
    if (text[eq + 1] !== '"') throw new Error(`unquoted label value in: ${line}`);
    let value = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const next = text[j + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape in: ${line}`);
        j++;
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`unterminated label value in: ${line}`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (i < text.length) throw new Error(`bad label separator in: ${line}`);
  }
  return labels;
}

function familyOf(sample: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(sample);
  if (direct !== undefined) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (sample.endsWith(suffix)) {
      const f = families.get(sample.slice(0, -suffix.length));
      if (f !== undefined && (f.type === 'histogram' || f.type === 'summary')) return f;
    }
  }
  return undefined;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { le: number; count: number }[]>();
  const counts = new Map<string, number>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}_bucket without le`);
      series.set(key, [...(series.get(key) ?? []), { le: parseValue(le, le), count: s.value }]);
    } else if (s.name === `${f.name}_count`) counts.set(key, s.value);
  }
  for (const [key, buckets] of series) {
    for (let i = 1; i < buckets.length; i++) {
      const prev = buckets[i - 1] as { le: number; count: number };
      const cur = buckets[i] as { le: number; count: number };
      if (!(cur.le > prev.le) || cur.count < prev.count) throw new Error(`${f.name}${key}: buckets not cumulative`);
    }
    const last = buckets[buckets.length - 1];
    if (last?.le !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    if (counts.get(key) !== last.count) throw new Error(`${f.name}${key}: _count differs from the +Inf bucket`);
  }
}

/** Parses and validates; throws with the offending line. */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, Family>();
  const closed = new Set<string>();
  let current: Family | undefined;
  const help = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (m === null) continue;
      const [, kind, name = '', rest = ''] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      if (kind === 'HELP') {
        help.set(name, rest);
        continue;
      }
      if (!TYPES.has(rest)) throw new Error(`bad type in: ${line}`);
      if (families.has(name)) throw new Error(`second TYPE for ${name}`);
      if (current !== undefined) closed.add(current.name);
      current = { name, type: rest, help: help.get(name) ?? '', samples: [] };
      families.set(name, current);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (m === null) throw new Error(`bad sample line: ${line}`);
    const [, name = '', labelText = '', valueText = ''] = m;
    const family = familyOf(name, families);
    if (family === undefined) throw new Error(`sample before its TYPE: ${line}`);
    if (family !== current || closed.has(family.name)) throw new Error(`family ${family.name} is split: ${line}`);
    const value = parseValue(valueText, line);
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`negative counter: ${line}`);
    family.samples.push({ name, labels: parseLabels(labelText, line), value });
  }
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}
