import { CompiledQuery, type QueryResult } from 'kysely';

// The statements every metered request runs (its hold, its charge, its usage record) as SQL
// text built once per shape instead of through the query builder per call: building and
// compiling a Kysely query cost more than running a cached, prepared SQLite statement. The text
// is the same in both stores (backquoted identifiers and `?` placeholders are valid SQLite and
// MySQL), so SQLite's statement cache and MySQL's prepared text see one string per shape.

/** Most row counts whose INSERT text is kept (batches are at most 500 rows). */
const MAX_SHAPES = 512;

const quote = (identifier: string): string => `\`${identifier}\``;

/** Something that runs compiled queries: the database or a transaction. */
export interface QueryRunner {
  executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>>;
}

/**
 * A multi-row INSERT of `columns` into `table`: `rows(values)` builds the query for any number of
 * rows, each an array of values in `columns`' order.
 */
export function insertInto<Row>(
  table: string,
  columns: readonly (keyof Row & string)[],
): (rows: readonly Row[]) => CompiledQuery {
  const head = `insert into ${quote(table)} (${columns.map(quote).join(', ')}) values `;
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const texts = new Map<number, string>();
  return (rows) => {
    if (rows.length === 0) throw new RangeError(`an INSERT into ${table} needs at least one row`);
    let text = texts.get(rows.length);
    if (text === undefined) {
      text = head + new Array<string>(rows.length).fill(tuple).join(', ');
      if (texts.size < MAX_SHAPES) texts.set(rows.length, text);
    }
    const parameters: unknown[] = new Array(rows.length * columns.length);
    let i = 0;
    for (const row of rows) for (const column of columns) parameters[i++] = row[column] ?? null;
    return CompiledQuery.raw(text, parameters);
  };
}

/**
 * A statement with a fixed text whose values differ per call (an UPDATE guarded by a WHERE, say):
 * `run(values)` binds them in `?` order.
 */
export function statement(text: string): (...parameters: unknown[]) => CompiledQuery {
  return (...parameters) => CompiledQuery.raw(text, parameters);
}

/**
 * A statement whose text depends only on a count (an IN list, a CASE per row): the text for each
 * count is built once by `build(count)`.
 */
export function shaped(build: (count: number) => string): (count: number, parameters: unknown[]) => CompiledQuery {
  const texts = new Map<number, string>();
  return (count, parameters) => {
    let text = texts.get(count);
    if (text === undefined) {
      text = build(count);
      if (texts.size < MAX_SHAPES) texts.set(count, text);
    }
    return CompiledQuery.raw(text, parameters);
  };
}

/** Rows changed by an UPDATE (what Kysely's builder reports as numUpdatedRows). */
export function affectedRows(result: QueryResult<unknown>): bigint {
  return result.numAffectedRows ?? 0n;
}
