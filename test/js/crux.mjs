// Helpers shared by the tests: running crux serve, and clients of the
// official TypeScript SDK connected to it.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** The crux command under test: $CRUX_BIN. */
export function cruxBin() {
  const bin = process.env.CRUX_BIN;
  if (!bin) {
    throw new Error('CRUX_BIN is not set: build crux (go build -o DIR/crux ./cmd/crux) and set CRUX_BIN=DIR/crux');
  }
  return bin;
}

/** The bearer token of agent "tester" in the HTTP tests. */
export const testerToken = 'tester-token-0123456789';

/** A fresh data directory, removed when the process exits. */
export function dataDir() {
  const dir = mkdtempSync(join(tmpdir(), 'crux-js-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The environment of a crux process: this one's, without crux's own variables. */
export function cruxEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('CRUX_') && !k.startsWith('CORECRUXD_')) env[k] = v;
  }
  return { ...env, ...extra };
}

/**
 * Starts crux serve --http on a free loopback port and resolves to
 * {url, proc, stderr(), stop()}; stop sends SIGTERM and resolves to the
 * exit code.
 */
export function serveHTTP(args = [], env = {}) {
  const proc = spawn(cruxBin(), ['serve', '--data', dataDir(), '--http', '127.0.0.1:0', ...args], {
    env: cruxEnv(env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`crux serve --http logged no URL within 20s: ${stderr}`)), 20000);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = /msg="crux: serving MCP over HTTP" url=(\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: m[1],
          proc,
          stderr: () => stderr,
          stop: async () => {
            proc.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
    exited.then((code) => reject(new Error(`crux serve --http exited (${code}): ${stderr}`)));
  });
}

/**
 * Makes transport open its session with protocol version (the TypeScript
 * client always asks for its newest, 2025-11-25, and takes any version it
 * supports in the answer), and records the version the server answered.
 */
export function observe(transport, version) {
  const seen = { version: undefined };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (version && msg.method === 'initialize') {
      msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
    }
    return send(msg, opts);
  };
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const onmessage = transport.onmessage;
    transport.onmessage = (msg, extra) => {
      if (msg.result?.protocolVersion && !seen.version) seen.version = msg.result.protocolVersion;
      onmessage?.(msg, extra);
    };
    return start();
  };
  return seen;
}

/** A TypeScript SDK client connected to crux serve over stdio as agent "tester". */
export async function stdioClient(version) {
  const transport = new StdioClientTransport({
    command: cruxBin(),
    args: ['serve', '--data', dataDir(), '--agent', 'tester'],
    env: cruxEnv(),
    stderr: 'pipe',
  });
  const seen = observe(transport, version);
  const client = new Client({ name: 'crux-js-stdio', version: 'test' });
  await client.connect(transport);
  return { client, seen };
}

/** A TypeScript SDK client connected to url with the bearer token. */
export async function httpClient(url, token, version) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const seen = observe(transport, version);
  const client = new Client({ name: 'crux-js-http', version: 'test' });
  await client.connect(transport);
  return { client, seen };
}
