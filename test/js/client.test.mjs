// The official TypeScript SDK client drives crux serve over stdio and over
// Streamable HTTP: list, call, a bad argument (an isError result the model
// reads on protocol 2025-11-25, a -32602 exception on 2024-11-05), a
// refusal (-32030 with its receipt), and a request without a token (401).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { McpError } from '@modelcontextprotocol/sdk/types.js';

import { httpClient, serveHTTP, stdioClient, testerToken } from './crux.mjs';

let server;
before(async () => {
  server = await serveHTTP([], { CRUX_AGENT_TOKENS: `tester=${testerToken}` });
});
after(async () => {
  const code = await server.stop();
  assert.equal(code, 0, `crux serve --http exits 0 on SIGTERM: ${server.stderr()}`);
});

const transports = {
  stdio: (version) => stdioClient(version),
  http: (version) => httpClient(server.url, testerToken, version),
};

for (const [name, connect] of Object.entries(transports)) {
  describe(`crux serve over ${name}`, () => {
    test('lists the tools and calls one as its agent', async () => {
      const { client, seen } = await connect();
      try {
        assert.equal(seen.version, '2025-11-25');
        const { tools } = await client.listTools();
        assert.ok(tools.length > 10, `${tools.length} tools`);
        assert.equal(tools[0].name, 'cuecrux_session');
        const res = await client.callTool({ name: 'get_agent_identity', arguments: {} });
        assert.notEqual(res.isError, true);
        assert.deepEqual(res.structuredContent, { agent_name: 'tester' });

        const stored = await client.callTool({
          name: 'store_fact',
          arguments: { entity: `js:${name}`, key: 'language', value: 'Go' },
        });
        assert.notEqual(stored.isError, true, JSON.stringify(stored));
        const found = await client.callTool({ name: 'query_facts', arguments: { entity: `js:${name}` } });
        assert.equal(found.structuredContent.count, 1);
      } finally {
        await client.close();
      }
    });

    test('a bad argument is an isError result on 2025-11-25', async () => {
      const { client, seen } = await connect('2025-11-25');
      try {
        assert.equal(seen.version, '2025-11-25');
        await client.listTools(); // as a client does before calling: the list's schemas apply to the result
        const res = await client.callTool({ name: 'query_facts', arguments: { top_k: 'ten' } });
        assert.equal(res.isError, true);
        const err = res.structuredContent.error;
        assert.equal(err.code, -32602);
        assert.match(err.message, /top_k/);
        assert.equal(err.data.param, 'top_k');
        assert.ok(err.data.reason);
        assert.equal(res.content[0].type, 'text');
        assert.equal(res.content[0].text, err.message, 'the model reads the message');
      } finally {
        await client.close();
      }
    });

    test('a bad argument is a -32602 error on 2024-11-05', async () => {
      const { client, seen } = await connect('2024-11-05');
      try {
        assert.equal(seen.version, '2024-11-05');
        await assert.rejects(client.callTool({ name: 'query_facts', arguments: { top_k: 'ten' } }), (e) => {
          assert.ok(e instanceof McpError, String(e));
          assert.equal(e.code, -32602);
          assert.match(e.message, /top_k/);
          assert.equal(e.data.param, 'top_k');
          return true;
        });
      } finally {
        await client.close();
      }
    });

    test('a hosted tool is refused with -32030 and a refusal receipt', async () => {
      const { client } = await connect();
      try {
        await assert.rejects(client.callTool({ name: 'sync_pull', arguments: {} }), (e) => {
          assert.ok(e instanceof McpError, String(e));
          assert.equal(e.code, -32030);
          assert.ok(e.data.reason_code);
          assert.ok(e.data.refusal_receipt.receipt_id);
          return true;
        });
      } finally {
        await client.close();
      }
    });
  });
}

describe('crux serve --http authentication', () => {
  test('a client without a token is refused', async () => {
    await assert.rejects(httpClient(server.url, undefined), /401|Unauthorized/);
  });
  test('a client with a wrong token is refused', async () => {
    await assert.rejects(httpClient(server.url, 'not-the-token-0123456789'), /401|Unauthorized/);
  });
  test('route_access_matrix reports the HTTP routes', async () => {
    const { client } = await httpClient(server.url, testerToken);
    try {
      const res = await client.callTool({ name: 'route_access_matrix', arguments: {} });
      const routes = res.structuredContent.routes.map((r) => r.route);
      assert.deepEqual(routes, ['POST /mcp initialize', 'POST /mcp tools/list', 'POST /mcp tools/call', 'GET /mcp', 'DELETE /mcp']);
    } finally {
      await client.close();
    }
  });
});
