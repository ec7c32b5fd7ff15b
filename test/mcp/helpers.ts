import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FakeToolProviders } from '../fakes/providers';

/** svc configured with perplexity, neshan and torob, all pointing at the fakes. */
export function configA(fakes: FakeToolProviders): string {
  return `
tools:
  web_search:
    provider: perplexity
    base_url: ${fakes.baseUrl('perplexity')}
    api_key: pplx-test-key
    model: sonar
    price: { input_per_1m: 100000, output_per_1m: 100000, cap: 1000 }
    timeout_ms: 3000
  maps_search_places:
    provider: neshan
    base_url: ${fakes.baseUrl('neshan')}
    api_key: neshan-test-key
    price: 460
    timeout_ms: 3000
  shopping_search:
    provider: torob
    base_url: ${fakes.baseUrl('torob')}
    price: 230
    timeout_ms: 3000
limits:
  # One key's 50 calls at once race for the wallet (tools.test.ts): more than the default 32 in flight.
  concurrent_per_key: 64
`;
}

/** svc configured with searxng, nominatim and digikala, all pointing at the fakes. */
export function configB(fakes: FakeToolProviders): string {
  return `
tools:
  web_search:
    provider: searxng
    base_url: ${fakes.baseUrl('searxng')}
    price: 150
    timeout_ms: 3000
  maps_search_places:
    provider: nominatim
    base_url: ${fakes.baseUrl('nominatim')}
    price: 460
    timeout_ms: 3000
  shopping_search:
    provider: digikala
    base_url: ${fakes.baseUrl('digikala')}
    price: 230
    timeout_ms: 3000
`;
}

/** An MCP SDK client connected to svc with a bearer key, the way coding assistants connect. */
export async function connectClient(baseUrl: string, key: string): Promise<Client> {
  const client = new Client({ name: 'svc-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/v1/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

export interface RawReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The JSON-RPC message (parsed from JSON or from the one SSE `data:` line); undefined for no body. */
  readonly message: Record<string, unknown> | undefined;
}

/** One raw POST to the MCP endpoint (for what the SDK client would never send). */
export async function post(
  baseUrl: string,
  body: string | object,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<RawReply> {
  const res = await fetch(`${baseUrl}/v1/mcp`, {
    method,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    ...(method === 'GET' || method === 'HEAD' ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  let message: Record<string, unknown> | undefined;
  if (text !== '') {
    const data = (res.headers.get('content-type') ?? '').startsWith('text/event-stream')
      ? text
          .split('\n')
          .find((line) => line.startsWith('data: '))
          ?.slice(6)
      : text;
    message = JSON.parse(data ?? 'null') as Record<string, unknown>;
  }
  return { status: res.status, headers: res.headers, text, message };
}

/** A tools/call request body. */
export function toolCall(name: string, args: unknown, id: number | string = 1): object {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}
