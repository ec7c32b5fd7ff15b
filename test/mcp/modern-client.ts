/**
 * A client that speaks only MCP 2026-07-28 over Streamable HTTP, written from the spec pages
 * (../shared/ref/mcp/spec-2026-07-28/): no `initialize`; every request carries the version, the
 * client's capabilities and identity in `_meta`, and mirrors them in `MCP-Protocol-Version`,
 * `Mcp-Method` and (for tools/call) `Mcp-Name`, Base64-sentinel-encoded when not plain ASCII.
 */
export const MODERN = '2026-07-28';

export interface ModernReply {
  readonly status: number;
  readonly headers: Headers;
  readonly message: Record<string, unknown>;
}

/** `Mcp-Name` as the spec encodes it: plain when printable ASCII, else `=?base64?…?=`. */
export function headerValue(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) ? value : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

export class ModernClient {
  private next = 1;
  constructor(
    private readonly baseUrl: string,
    private readonly key: string,
    private readonly clientInfo = { name: 'svc-modern-test', version: '1.0.0' },
  ) {}

  /** Sends one request; `override` replaces headers (or removes them with ''), `meta` adds to `_meta`. */
  async request(
    method: string,
    params: Record<string, unknown> = {},
    override: { headers?: Record<string, string>; meta?: Record<string, unknown>; accept?: string } = {},
  ): Promise<ModernReply> {
    const id = this.next++;
    const body = {
      jsonrpc: '2.0',
      id,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientInfo': this.clientInfo,
          'io.modelcontextprotocol/clientCapabilities': {},
          ...override.meta,
        },
      },
    };
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.key}`,
      'content-type': 'application/json',
      accept: override.accept ?? 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(method === 'tools/call' && typeof params['name'] === 'string'
        ? { 'mcp-name': headerValue(params['name']) }
        : {}),
    };
    for (const [name, value] of Object.entries(override.headers ?? {})) {
      if (value === '') delete headers[name];
      else headers[name] = value;
    }
    const res = await fetch(`${this.baseUrl}/v1/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await res.text();
    // A response stream carries the one response as an SSE `message` event.
    const json = (res.headers.get('content-type') ?? '').startsWith('text/event-stream')
      ? (text.split('\n').find((line) => line.startsWith('data: ')) ?? '').slice('data: '.length)
      : text;
    return { status: res.status, headers: res.headers, message: JSON.parse(json) as Record<string, unknown> };
  }

  /** A request that must succeed: its `result`. */
  async call(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const reply = await this.request(method, params);
    const result = reply.message['result'];
    if (reply.status !== 200 || result === undefined)
      throw new Error(`${method} failed: HTTP ${reply.status} ${JSON.stringify(reply.message)}`);
    return result as Record<string, unknown>;
  }
}
