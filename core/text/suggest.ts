/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between two short strings. */
function distance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) (rows[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const prev = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row[j] = d;
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * The candidate a mistyped name most likely meant, for a "did you mean" hint: the same name in
 * another case or behind a client's namespace prefix, or the nearest within a few edits (about a third of its length, at least 2).
 * Undefined when nothing is close, so an unrelated name gets no misleading guess.
 */
export function closest(input: string, candidates: Iterable<string>): string | undefined {
  const wanted = input.trim().toLowerCase();
  if (wanted === '' || wanted.length > 200) return undefined;
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(wanted.length / 3)) + 1;
  for (const candidate of candidates) {
    // A client's namespaced form of the name (`mcp__svc__web_search`, `svc/svc-pro`).
    if (/[_/:.]$/.test(wanted.slice(0, wanted.length - candidate.length)) && wanted.endsWith(candidate.toLowerCase()))
      return candidate;
    const d = distance(wanted, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** ` Did you mean 'x'?`, or '' when nothing is close. */
export function didYouMean(input: string, candidates: Iterable<string>, quote = "'"): string {
  const match = closest(input, candidates);
  return match === undefined ? '' : ` Did you mean ${quote}${match}${quote}?`;
}
