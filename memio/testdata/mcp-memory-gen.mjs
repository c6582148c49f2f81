// Writes a memory.jsonl with the real @modelcontextprotocol/server-memory.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import path from "node:path";
const out = path.resolve(process.argv[2]);
const transport = new StdioClientTransport({
  command: "node",
  args: [path.resolve("node_modules/@modelcontextprotocol/server-memory/dist/index.js")],
  env: { ...process.env, MEMORY_FILE_PATH: out },
});
const c = new Client({ name: "fixture", version: "1" });
await c.connect(transport);
const call = (name, args) => c.callTool({ name, arguments: args });
await call("create_entities", { entities: [
  { name: "Ada Lovelace", entityType: "person", observations: ["Wrote the first published algorithm", "Worked with Charles Babbage"] },
  { name: "Analytical Engine", entityType: "machine", observations: ["A proposed mechanical general-purpose computer"] },
  { name: "Charles Babbage", entityType: "person", observations: ["Designed the Difference Engine"] },
]});
await call("create_relations", { relations: [
  { from: "Ada Lovelace", to: "Analytical Engine", relationType: "wrote notes on" },
  { from: "Charles Babbage", to: "Analytical Engine", relationType: "designed" },
]});
await call("add_observations", { observations: [
  { entityName: "Ada Lovelace", contents: ["Born in London in 1815", "Daughter of Lord Byron"] },
]});
await call("delete_observations", { deletions: [{ entityName: "Charles Babbage", observations: [] }] });
await c.close();
