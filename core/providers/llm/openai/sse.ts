/**
 * Parses a server-sent-events byte stream incrementally: yields the `data` of each event as soon
 * as its blank line arrives, whatever the chunk boundaries (split lines, split UTF-8 sequences,
 * CRLF or LF). Comments and fields other than `data` are skipped.
 */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let data: string[] = [];
  const flushLine = (line: string): string | undefined => {
    if (line === '') {
      if (data.length === 0) return undefined;
      const event = data.join('\n');
      data = [];
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== 'data') return undefined;
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    data.push(value);
    return undefined;
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
      // A lone CR at the very end may be the first half of a CRLF still in flight.
      if (buffer[newline] === '\r' && newline === buffer.length - 1) break;
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      const event = flushLine(line);
      if (event !== undefined) yield event;
    }
  }
  buffer += decoder.decode();
  if (buffer !== '') {
    const event = flushLine(buffer.replace(/\r$/, ''));
    if (event !== undefined) yield event;
  }
  const last = flushLine('');
  if (last !== undefined) yield last;
}
