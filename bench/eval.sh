#!/bin/sh
# eval.sh runs the retrieval evaluation (bench/retrieval/cmd/eval): in one
# run it measures every corpus against every system side by side and
# prints a markdown table per corpus (recall@10, MRR@10, nDCG@10 where the
# judgments are graded, p50 and p95 query latency, ingest time); the JSON
# form goes to bench/retrieval/testdata/eval.json.
#
#	bench/eval.sh [eval flags...]
#	bench/eval.sh -corpora conversations,cranfield -systems crux,textbook-bm25
#	bench/eval.sh -corpora conversations -conversations /path/to/held-back
#	bench/eval.sh -corpora cranfield -detail cranfield/crux   # per-question answers
#
# Corpora: conversations and cranfield are read from the evaluation data
# directory, $CRUX_EVAL_DATA or else ../shared/eval from the repository root
# (-data, -conversations, -cranfield name others); godocs is made from this
# machine's Go standard library by bench/retrieval.sh, cached under
# bench/retrieval/testdata (the first run takes about a minute longer).
#
# Environment: N, SEED (Go-docs queries: 1000, 1), REPS (timed runs of
# each question: 3), RETRIEVAL_DATA (cache directory), CRUX_EVAL_POSTGRES
# (a postgres:// URL: crux-pg and crux-facts-pg, crux over PostgreSQL in
# that database, join the systems; each store is a schema of its own,
# dropped after).
#
# About a minute and a half on a 2-core machine once the Go-docs corpus is
# cached.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench/retrieval
data=${RETRIEVAL_DATA:-$here/testdata}
mkdir -p "$data"
godocs=
case " $* " in
*" -corpora "*|*" --corpora "*|*" -corpora="*|*" --corpora="*)
	# godocs only when asked for
	case " $* " in *godocs*) godocs=1 ;; esac ;;
*) godocs=1 ;;
esac
set -- -json "$data/eval.json" -reps "${REPS:-3}" "$@"
if [ -n "${CRUX_EVAL_POSTGRES:-}" ]; then
	set -- -crux-postgres "$CRUX_EVAL_POSTGRES" "$@"
fi
if [ -n "$godocs" ]; then
	paths=$(sh "$root/bench/retrieval.sh" --paths)
	set -- -godocs-corpus "${paths% *}" -godocs-queries "${paths#* }" "$@"
fi
# crux-stdio and crux-facts-stdio ask a crux serve process built from this
# checkout over stdio, as an MCP client does.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/crux" ./cmd/crux)
cd "$here"
go run ./cmd/eval -crux-bin "$bin/crux" "$@"
