import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/*
 * A tiny remote MCP server (the MCP SDK's own server over Streamable HTTP, stateless) that stands
 * for a client's server of the hosted `mcp` tool: it asks for a bearer token, lists two tools
 * (`lookup`, which answers, and `broken`, which fails as a tool), and records what it received.
 */

export interface FakeMcpServer {
  /** http://127.0.0.1:PORT/mcp */
  readonly url: string;
  readonly port: number;
  /** Every HTTP request's method and headers, in order. */
  readonly requests: { method: string; headers: http.IncomingHttpHeaders }[];
  /** Every tools/call: name and arguments. */
  readonly calls: { name: string; arguments: unknown }[];
  close(): Promise<void>;
}

export const FAKE_MCP_TOKEN = 'remote-mcp-secret-token';

export async function startFakeMcpServer(): Promise<FakeMcpServer> {
  const requests: FakeMcpServer['requests'] = [];
  const calls: FakeMcpServer['calls'] = [];

  const mcpServer = (): Server => {
    const server = new Server({ name: 'fake-docs', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        {
          name: 'lookup',
          description: 'Looks a word up in the docs.',
          inputSchema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
        },
        {
          name: 'broken',
          description: 'Always fails.',
          inputSchema: { type: 'object', properties: {} },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      calls.push({ name: request.params.name, arguments: request.params.arguments });
      if (request.params.name === 'lookup') {
        const word = String((request.params.arguments ?? {})['word'] ?? '');
        return { content: [{ type: 'text', text: `${word}: a word found in the docs.` }] };
      }
      return { content: [{ type: 'text', text: 'the docs index is down' }], isError: true };
    });
    return server;
  };

  const httpServer = http.createServer((req, res) => {
    requests.push({ method: req.method ?? '', headers: req.headers });
    if (req.headers['authorization'] !== `Bearer ${FAKE_MCP_TOKEN}`) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true }); // no session id: stateless;
        const server = mcpServer();
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8')));
      })();
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const port = (httpServer.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    requests,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}
