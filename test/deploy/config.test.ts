import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parseConfig } from '../../core/config/load';

/*
 * deploy/svc.yaml is the config file compose.yaml mounts, and the Helm chart ships a copy of it
 * (a chart cannot read files outside its directory). Both must be the same file, load with svc's
 * own loader once their ${NAME} references are set, and hold no secret of their own.
 */

const DEPLOY = path.join(__dirname, '..', '..', 'deploy');
const read = (file: string): string => fs.readFileSync(path.join(DEPLOY, file), 'utf8');
/** The document without its leading comment lines (each copy explains where it lives). */
const body = (text: string): string => text.replace(/^(#.*\n)+/, '');

const ENV = {
  UPSTREAM_BASE_URL: 'https://llm.example.net/v1',
  UPSTREAM_API_KEY: 'sk-test',
  UPSTREAM_MODEL: 'm-1',
  SEARXNG_BASE_URL: 'http://searxng:8080',
  NESHAN_BASE_URL: 'https://api.neshan.org',
  NESHAN_API_KEY: 'service.test',
  TOROB_BASE_URL: 'https://api.torob.com',
};

describe('deploy/svc.yaml: the config file of compose.yaml and the Helm chart', () => {
  it('is the same file in deploy/ and in the chart', () => {
    assert.equal(body(read('helm/svc/files/svc.yaml')), body(read('svc.yaml')));
  });

  it('loads with svc’s config loader once its references are set, with real providers for the model and all three tools', () => {
    const config = parseConfig(read('svc.yaml'), ENV, 'deploy/svc.yaml');
    assert.deepEqual([...config.models.keys()], ['svc-pro']);
    assert.deepEqual([...config.tools.values()].map((t) => [t.name, t.provider]).sort(), [
      ['maps_search_places', 'neshan'],
      ['shopping_search', 'torob'],
      ['web_search', 'searxng'],
    ]);
  });

  it('names every environment variable it needs, and an unset one stops the start', () => {
    for (const name of Object.keys(ENV)) {
      const { [name]: _left, ...rest } = ENV as Record<string, string>;
      assert.throws(() => parseConfig(read('svc.yaml'), rest, 'deploy/svc.yaml'), new RegExp(`${name} is not set`));
    }
  });

  it('holds no secret: every key, token or password is a ${NAME} reference', () => {
    const literal = read('svc.yaml')
      .split('\n')
      .filter((line) => /^\s*(api_key|token|password|secret)\s*:/.test(line))
      .filter((line) => !/:\s*\$\{[A-Za-z_][A-Za-z0-9_]*\}\s*$/.test(line));
    assert.deepEqual(literal, []);
  });
});
