/**
 * Reads `read()` every 10 ms until `ok` holds for its value (at most 500 times, about 5 s), and
 * returns that value; throws when it never does. For what settles just after an answer: a
 * stream's settle, an upstream request's close.
 */
export async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition never became true');
}
