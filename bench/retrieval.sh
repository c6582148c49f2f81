#!/bin/sh
# retrieval.sh runs the retrieval benchmark (bench/retrieval): it makes the
# corpus from this machine's Go standard library and the known-item queries
# (both cached under bench/retrieval/testdata, keyed by Go release and by
# the generators' source), then ingests the corpus into every system and
# measures them in one run, printing a markdown table; the JSON form goes
# to bench/retrieval/testdata/results.json.
#
#	bench/retrieval.sh [compare flags...]      e.g. -reps 10, -systems bleve
#	bench/retrieval.sh --paths                 make the corpus and queries,
#	                                           print their paths, no run
#
# Environment:
#	N, SEED         query count and seed (1000, 1)
#	INGEST_RUNS     ingests per system, the median reported (3)
#	REPS            timed runs of each query (5)
#	RETRIEVAL_DATA  cache directory (bench/retrieval/testdata)
#
# On a 2-core machine a run takes about 15 s once the corpus is cached.
set -eu
here=$(cd "$(dirname "$0")/retrieval" && pwd)
cd "$here"
n=${N:-1000}
seed=${SEED:-1}
data=${RETRIEVAL_DATA:-$here/testdata}
mkdir -p "$data"

key() { cat "$@" | sha256sum | cut -c1-10; }
gov=$(go env GOVERSION)
ckey=$(printf '%s %s' "$gov" "$(key corpus.go cmd/corpus/main.go)")
ckey=$(printf '%s' "$ckey" | sha256sum | cut -c1-10)
corpus=$data/corpus-$gov-$ckey.jsonl
queries=$data/queries-$ckey-$(key queries.go cmd/queries/main.go)-n$n-seed$seed.jsonl
if [ ! -s "$corpus" ]; then
	go run ./cmd/corpus -out "$corpus" >&2
fi
if [ ! -s "$queries" ]; then
	go run ./cmd/queries -corpus "$corpus" -out "$queries" -n "$n" -seed "$seed" >&2
fi
if [ "${1:-}" = --paths ]; then
	echo "$corpus" "$queries"
	exit 0
fi

go run ./cmd/compare -corpus "$corpus" -queries "$queries" \
	-ingest-runs "${INGEST_RUNS:-3}" -reps "${REPS:-5}" -json "$data/results.json" "$@"
