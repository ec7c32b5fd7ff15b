import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createApp } from '../../adapters/mcp/app';
import { connectCore, type CoreConnection } from '../../adapters/http/core-client';
import { assertMcpResponse } from '../helpers/mcp-schema';

describe('the MCP adapter when the core cannot be reached', () => {
  let connection: CoreConnection;
  let server: http.Server;
  let url: string;

  before(async () => {
    // Port 1 on loopback: nothing listens there, so every core call fails as UNAVAILABLE.
    connection = connectCore('127.0.0.1:1');
    const app = createApp({
      core: connection.clients,
      logger: pino({ level: 'silent' }),
      maxBodyBytes: 1 << 20,
      allowedOrigins: [],
    });
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    connection.close();
  });

  it('answers a JSON-RPC internal error in its own words, with no gRPC detail', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        authorization: 'Bearer svc_sk_whatever',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    const body = (await res.json()) as { id: number; error: { code: number; message: string; data?: unknown } };
    assertMcpResponse(body, 'ListToolsResult');
    assert.equal(body.id, 3);
    assert.equal(body.error.code, -32603);
    assert.equal(body.error.message, 'svc is temporarily unavailable; try again in a moment');
    assert.doesNotMatch(JSON.stringify(body), /127\.0\.0\.1|ECONNREFUSED|No connection/);
  });
});
