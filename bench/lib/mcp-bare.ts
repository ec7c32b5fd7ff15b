// The MCP SDK's stateless Streamable HTTP example, as written (a new McpServer and transport for
// every POST, no auth, no billing), serving svc's offline sandbox maps search:
// `node -r tsx/cjs bench/lib/mcp-bare.ts` prints its MCP endpoint URL.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createSandboxMaps } from '../../core/tools/providers/sandbox-tools';
import { MAPS_SEARCH_PLACES } from '../../core/tools/catalog';
import { TEHRAN } from '../../core/tools/geo';

async function main(): Promise<void> {
  const maps = createSandboxMaps();
  const inputSchema = {
    query: z.string().min(1).max(200),
    latitude: z.number().optional(),
    longitude: z.number().optional(),
    limit: z.number().int().min(1).max(30).optional(),
  };
  const server = http.createServer((req, res) => {
    const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
    mcp.registerTool(
      'maps_search_places',
      { title: MAPS_SEARCH_PLACES.title, description: MAPS_SEARCH_PLACES.description, inputSchema },
      async (args) => {
        const { items } = await maps.run(
          {
            query: args.query,
            latitude: args.latitude ?? TEHRAN.latitude,
            longitude: args.longitude ?? TEHRAN.longitude,
            limit: args.limit ?? 10,
          },
          new AbortController().signal,
        );
        const structuredContent = { query: args.query, results: items };
        return { content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent };
      },
    );
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  console.log(`http://127.0.0.1:${port}/mcp`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
