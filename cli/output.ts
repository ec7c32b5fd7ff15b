/** A JSON value whose integers may be `bigint` (money): printed as exact JSON numbers, never floats. */
export type JsonOut =
  string | number | bigint | boolean | null | readonly JsonOut[] | { readonly [key: string]: JsonOut };

/**
 * Serializes to one line of JSON. `JSON.stringify` rejects bigint, and turning money into a
 * `number` first would round anything past 2^53; digits are written as they are instead.
 */
export function toJson(value: JsonOut): string {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`cannot print ${value} as JSON`);
    return JSON.stringify(value);
  }
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  const fields = Object.entries(value as { readonly [key: string]: JsonOut }).map(
    ([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`,
  );
  return `{${fields.join(',')}}`;
}

type Cell = string | number | bigint | boolean | null;

function cellText(cell: Cell): string {
  if (cell === null) return '-';
  return String(cell);
}

/** A column table with a header row; an empty list prints `(none)` under the header. */
export function table(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = rows.map((row) => row.map(cellText));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => row[i]?.length ?? 0)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  const body = text.length === 0 ? ['(none)'] : text.map(line);
  return [line(headers.map((h) => h.toUpperCase())), ...body].join('\n');
}

/** A two-column `field  value` listing for one record. */
export function record(fields: readonly (readonly [string, Cell])[]): string {
  const width = Math.max(...fields.map(([name]) => name.length));
  return fields.map(([name, value]) => `${name.padEnd(width)}  ${cellText(value)}`).join('\n');
}

export function isoOrNull(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}
