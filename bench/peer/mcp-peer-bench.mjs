// mcp-peer-bench.mjs compares crux serve with the reference MCP memory
// server (@modelcontextprotocol/server-memory) over stdio, as an MCP client
// sees them: the p50 latency of a write and of a query, one call at a time,
// in stores of 2,000 and 10,000 facts.
//
//	cd bench/peer
//	npm ci                       # the pinned versions of package.json
//	node mcp-peer-bench.mjs      # builds crux from this tree with go build
//
// Environment: SIZES (comma-separated fact counts, default 2000,10000),
// CALLS (timed calls per figure, default 200), CRUX (a crux binary to use
// instead of building one). It takes a few minutes and is not part of CI.
//
// A fact is (entity, key, value); the corpus has 10 facts per entity and a
// value word (topicNNNN) shared by 100 facts, as in the Go benchmarks.
//   - crux: store_fact {entity, key, value}; query_facts {query: topicNNNN}
//     (its top 10 by effective confidence). Every write is durable (fsync)
//     before it is answered, as crux ships.
//   - memory server: a fact is the observation "key: value" of the entity
//     (entityType "fact"): create_entities for an entity's first fact,
//     add_observations for the others; a query is search_nodes {query:
//     topicNNNN} (every matching entity, whole). It rewrites its whole
//     JSONL file on each write, without fsync.
// The stores are filled before timing, untimed: crux through store_fact
// calls, 32 in flight; the memory server's file is written directly in its
// own JSONL format (its writes cannot overlap: each one loads and rewrites
// the whole graph, so concurrent writes would lose facts). The timed writes
// add new facts to existing entities (add_observations for the memory
// server); the timed queries ask for a different topic each time.
//
// The report prints, per size, each server's write and query p50 in
// milliseconds and how many times faster crux is (memory p50 / crux p50),
// and the p50 of an MCP ping to each: the round trip of this client and
// the transport, which every figure includes.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const sizes = (process.env.SIZES || "2000,10000").split(",").map(Number);
const calls = Number(process.env.CALLS || 200);
const work = mkdtempSync(join(tmpdir(), "mcp-peer-bench-"));

function fact(i, n) {
  const topics = Math.max(1, Math.floor(n / 100));
  return {
    entity: `entity:${Math.floor(i / 10)}`,
    key: `k${i % 10}`,
    value: `note ${i} about topic${String(i % topics).padStart(4, "0")} and widget${i % 5000}`,
  };
}

function p50(ms) {
  const s = [...ms].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function connect(command, args, env) {
  const transport = new StdioClientTransport({ command, args, env: { ...process.env, ...env }, stderr: "ignore" });
  const client = new Client({ name: "mcp-peer-bench", version: "0" });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) {
    throw new Error(`${name}: ${JSON.stringify(res.content)}`);
  }
  return res;
}

async function timed(n, fn) {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return p50(ms);
}

// The timed writes: new facts of existing entities (one per entity).
function timedFact(i, n) {
  const f = fact((i * 10) % n, n);
  return { ...f, key: `bench${i}`, value: `timed write ${i} about topic0000` };
}

function topic(i, n) {
  const topics = Math.max(1, Math.floor(n / 100));
  return `topic${String((i * 7919) % topics).padStart(4, "0")}`;
}

async function benchCrux(bin, n) {
  const dir = join(work, `crux-${n}`);
  const client = await connect(bin, ["serve", "--data", dir, "--agent", "bench"], {});
  try {
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        await call(client, "store_fact", fact(i, n));
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    const ping = await timed(calls, () => client.ping());
    const write = await timed(calls, (i) => call(client, "store_fact", timedFact(i, n)));
    const query = await timed(calls, (i) => call(client, "query_facts", { query: topic(i, n) }));
    return { ping, write, query };
  } finally {
    await client.close();
  }
}

async function benchMemory(n) {
  const file = join(work, `memory-${n}.jsonl`);
  const entities = new Map();
  for (let i = 0; i < n; i++) {
    const f = fact(i, n);
    if (!entities.has(f.entity)) entities.set(f.entity, []);
    entities.get(f.entity).push(`${f.key}: ${f.value}`);
  }
  writeFileSync(
    file,
    [...entities].map(([name, observations]) => JSON.stringify({ type: "entity", name, entityType: "fact", observations })).join("\n"),
  );
  const require = createRequire(import.meta.url);
  const entry = require.resolve("@modelcontextprotocol/server-memory/dist/index.js");
  const client = await connect(process.execPath, [entry], { MEMORY_FILE_PATH: file });
  try {
    const ping = await timed(calls, () => client.ping());
    const write = await timed(calls, (i) => {
      const f = timedFact(i, n);
      return call(client, "add_observations", { observations: [{ entityName: f.entity, contents: [`${f.key}: ${f.value}`] }] });
    });
    const query = await timed(calls, (i) => call(client, "search_nodes", { query: topic(i, n) }));
    return { ping, write, query };
  } finally {
    await client.close();
  }
}

async function main() {
  let bin = process.env.CRUX;
  if (!bin) {
    bin = join(work, "crux");
    execFileSync("go", ["build", "-o", bin, "./cmd/crux"], { cwd: repo, stdio: "inherit" });
  }
  console.log(`timed calls per figure: ${calls}, one at a time; p50 in ms`);
  console.log("facts   | write: crux  memory  memory/crux | query: crux  memory  memory/crux | ping: crux  memory");
  for (const n of sizes) {
    const c = await benchCrux(bin, n);
    const m = await benchMemory(n);
    const row = [
      String(n).padEnd(7),
      `| write: ${c.write.toFixed(3)}  ${m.write.toFixed(3)}  ${(m.write / c.write).toFixed(1)}x`,
      `| query: ${c.query.toFixed(3)}  ${m.query.toFixed(3)}  ${(m.query / c.query).toFixed(1)}x`,
      `| ping: ${c.ping.toFixed(3)}  ${m.ping.toFixed(3)}`,
    ];
    console.log(row.join(" "));
  }
}

try {
  await main();
} finally {
  rmSync(work, { recursive: true, force: true });
}
