#!/bin/sh
# Call-path benchmark: stdio latency of crux serve, this tree against an
# older crux, on the same machine in one run, rounds alternating between
# the two.
#
#   OLD=/path/to/old/checkout bench/callpath.sh
#   OLD=... FIGURES=query bench/callpath.sh      only the query figure
#
# OLD is a checkout of the crux to compare with, for example one made with
#   git worktree add /tmp/old-callpath 321de6c
# Environment (defaults in brackets):
#   FIGURES      the figures to measure, of store_fact, query_facts and query
#                [store_fact query_facts query]
#   ROUNDS       rounds per figure; the figure is the median of the rounds' p50 [5]
#   WRITE_FACTS  facts in the store when the writes are timed [2000]
#   WRITES       store_fact calls timed per round, one at a time [2000]
#   QUERY_FACTS  facts in the store the queries run on [50000]
#   QUERIES      query_facts calls timed per round, one at a time [2000]
#
# Figures, each for old and new, and old/new:
#   store_fact p50 (ms): one client, fsync on (as shipped), in a fresh data
#     directory prefilled with WRITE_FACTS facts each round;
#   query_facts p50 (ms): one client, a keyword query (top 10 of the 100
#     facts sharing a word), in a data directory of QUERY_FACTS facts made
#     once per binary;
#   query p50 (ms): one client, document retrieval (limit 10, the default
#     token_budget), each known-item query of bench/retrieval (1,000) once
#     per round, in a data directory where crux ingest put that
#     benchmark's corpus (about 19,000 Go standard-library passages, made
#     by bench/retrieval.sh --paths) once per binary.
# Each round is one run of bench/stdio-latency against crux serve.
set -eu

: "${OLD:?set OLD to a checkout of the crux to compare with}"
ROUNDS=${ROUNDS:-5}
WRITE_FACTS=${WRITE_FACTS:-2000}
WRITES=${WRITES:-2000}
QUERY_FACTS=${QUERY_FACTS:-50000}
QUERIES=${QUERIES:-2000}
FIGURES=${FIGURES:-store_fact query_facts query}

here=$(cd "$(dirname "$0")" && pwd)
new_tree=$(cd "$here/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$new_tree" && go build -o "$work/lat" ./bench/stdio-latency && go build -o "$work/crux-new" ./cmd/crux)
(cd "$OLD" && go build -o "$work/crux-old" ./cmd/crux)

serve() { # binary dir
	echo "$work/crux-$1" serve --data "$2" --agent bench
}

# field NAME LINE: the value of NAME=... in a report line.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# wants FIGURE: whether FIGURES names FIGURE.
wants() { case " $FIGURES " in *" $1 "*) return 0 ;; esac; return 1; }
for fig in $FIGURES; do
	case $fig in
	store_fact | query_facts | query) ;;
	*) echo "callpath.sh: unknown figure $fig in FIGURES" >&2 && exit 2 ;;
	esac
done

if wants query_facts; then
	echo "query_facts corpus: $QUERY_FACTS facts per binary" >&2
	for b in old new; do
		"$work/lat" -prefill "$QUERY_FACTS" -- $(serve $b "$work/q-$b") 2>/dev/null >/dev/null
	done
fi
if wants query; then
	# The retrieval benchmark's corpus, as crux ingest reads it: its
	# lines without the doc_start field (the last one of each line).
	paths=$("$here/retrieval.sh" --paths) # an assignment, so that set -e sees its failure
	set -- $paths
	doc_queries=$2
	sed 's/,"doc_start":[0-9]*}$/}/' "$1" >"$work/docs.jsonl"
	echo "query corpus: $(wc -l <"$work/docs.jsonl") passages per binary" >&2
	for b in old new; do
		"$work/crux-$b" ingest --data "$work/d-$b" --tenant bench "$work/docs.jsonl" >/dev/null 2>"$work/ingest.log" ||
			{ cat "$work/ingest.log" >&2; exit 1; }
	done
fi

for r in $(seq "$ROUNDS"); do
	for b in old new; do
		if wants store_fact; then
			rm -rf "$work/w-$b"
			line=$("$work/lat" -prefill "$WRITE_FACTS" -writes "$WRITES" -- $(serve $b "$work/w-$b") 2>/dev/null)
			field writes_p50_ms "$line" >>"$work/store_fact-$b"
		fi
		if wants query_facts; then
			line=$("$work/lat" -queries "$QUERIES" -topics $((QUERY_FACTS / 100)) -- $(serve $b "$work/q-$b") 2>/dev/null)
			field queries_p50_ms "$line" >>"$work/query_facts-$b"
		fi
		if wants query; then
			line=$("$work/lat" -doc-queries "$doc_queries" -- $(serve $b "$work/d-$b") 2>/dev/null)
			field docqueries_p50_ms "$line" >>"$work/query-$b"
		fi
	done
	msg="round $r:"
	for fig in $FIGURES; do
		msg="$msg $fig p50 old $(tail -1 "$work/$fig-old") new $(tail -1 "$work/$fig-new"),"
	done
	echo "${msg%,} (ms)" >&2
done

for fig in $FIGURES; do
	o=$(median <"$work/$fig-old")
	n=$(median <"$work/$fig-new")
	case $fig in
	store_fact) label="stdio store_fact p50 at $WRITE_FACTS facts" ;;
	query_facts) label="stdio query_facts p50 at $QUERY_FACTS facts" ;;
	query) label="stdio query p50 over the retrieval corpus" ;;
	esac
	echo "$label (median of $ROUNDS): old $o ms, new $n ms, old/new $(awk -v o="$o" -v n="$n" 'BEGIN {printf "%.2f", o/n}')"
done
