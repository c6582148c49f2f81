// The official MCP conformance suite (@modelcontextprotocol/conformance)
// against crux serve --http, for the scenarios that apply to a server with
// arbitrary tools. The others need tools, prompts or resources of the
// suite's own (test_simple_text, ...), which crux does not have.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import { serveHTTP } from './crux.mjs';

const scenarios = ['server-initialize', 'ping', 'tools-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'];

// The suite's command, run with this node (it needs Node 22).
const require = createRequire(import.meta.url);
const cli = join(dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');

let server;
before(async () => {
  const major = Number(process.versions.node.split('.')[0]);
  assert.ok(major >= 22, `the conformance suite needs Node 22 or later, this is ${process.version} (run node_modules/.bin/node)`);
  // No tokens: the suite's client sends none, so every request is anonymous.
  server = await serveHTTP();
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

/** Runs one scenario and resolves to {code, output}. */
function run(scenario) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [cli, 'server', '--url', server.url, '--scenario', scenario], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout.on('data', (c) => (output += c));
    proc.stderr.on('data', (c) => (output += c));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60000);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, output });
    });
  });
}

for (const scenario of scenarios) {
  test(`conformance: ${scenario}`, async () => {
    const { code, output } = await run(scenario);
    const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
    assert.equal(code, 0, plain);
    const m = /Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/.exec(plain);
    assert.ok(m, `no summary in: ${plain}`);
    assert.equal(m[1], m[2], plain);
    assert.equal(m[3], '0', plain);
    assert.equal(m[4], '0', plain);
  });
}
