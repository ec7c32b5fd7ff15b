'use strict';
/* global fetch, AbortSignal */
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS script run by `node` as it is */
// The image's HEALTHCHECK. The same image runs `svc serve`, `svc gateway` and `svc core`; the
// command PID 1 runs decides what "healthy" means: HTTP GET /healthz on SVC_HTTP_ADDR's port for
// the ones that serve HTTP, the gRPC health service (grpc.health.v1) on SVC_GRPC_ADDR's port for
// `svc core`, which has no HTTP listener. Exits 0 when healthy, 1 otherwise.
const fs = require('node:fs');

function port(value, fallback) {
  const match = /:(\d+)$/.exec(value ?? '');
  return match ? Number(match[1]) : fallback;
}

function command() {
  try {
    return fs.readFileSync('/proc/1/cmdline', 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

async function http() {
  const p = port(process.env.SVC_HTTP_ADDR, 8080);
  const response = await fetch(`http://127.0.0.1:${p}/healthz`, { signal: AbortSignal.timeout(2500) });
  return response.status === 200;
}

async function grpc() {
  const { createChannel, createClient } = require('nice-grpc');
  const { HealthDefinition } = require('nice-grpc-server-health');
  const channel = createChannel(`127.0.0.1:${port(process.env.SVC_GRPC_ADDR, 50051)}`);
  try {
    const client = createClient(HealthDefinition, channel);
    const { status } = await client.check({ service: '' }, { signal: AbortSignal.timeout(2500) });
    // grpc.health.v1 ServingStatus: 1 = SERVING.
    return status === 1;
  } finally {
    channel.close();
  }
}

const isCore = command().includes('core');
(isCore ? grpc() : http()).then(
  (ok) => process.exit(ok ? 0 : 1),
  () => process.exit(1),
);
