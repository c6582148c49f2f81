// Package tools holds every crux tool: its name, description, input schema,
// annotations, typed arguments, output type and handler, one descriptor
// per tool, in one file per tool group (facts.go, identity.go, ...), built
// on package toolkit's descriptor and pipeline.
//
// [All] is the one explicit, ordered list of tools. The few tools that
// need more of the server than every handler gets (a data directory, an
// engram directory, an attestation CA, a sync remote) close over the
// [Deps] All is given.
//
// # Typed outputs
//
// Every tool answers with a Go value as its structured content, of a type
// exported here (StoreFactOutput for store_fact, QueryFactsOutput for
// query_facts, and so on), so that a program embedding crux can read a
// result without parsing its text (crux.Decode does it). The output
// schema tools/list declares for a tool is derived from that type, and a
// test runs every tool and checks its real answer against both. A few
// tools have a second shape, with a type of its own: the answer of the
// artefact tools and memory_acknowledge_use while their feature flag is
// off (feature_enabled false and a note, nothing done), and
// engram_resolve's manifest.
//
// A tool's input schema is derived from its argument struct, tags and all
// (see toolkit.InputSchemaOf); a snapshot of every tool's schemas sits in
// testdata/schemas for review. A tool's tests sit beside it (facts.go,
// facts_test.go).
package tools
