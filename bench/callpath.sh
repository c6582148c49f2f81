#!/bin/sh
# Call-path benchmark: stdio latency of crux serve, this tree against an
# older crux, on the same machine in one run, rounds alternating between
# the two.
#
#   OLD=/path/to/old/checkout bench/callpath.sh
#
# OLD is a checkout of the crux to compare with, for example one made with
#   git worktree add /tmp/old-callpath 321de6c
# Environment (defaults in brackets):
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
#     once per binary.
# Each round is one run of bench/stdio-latency against crux serve.
set -eu

: "${OLD:?set OLD to a checkout of the crux to compare with}"
ROUNDS=${ROUNDS:-5}
WRITE_FACTS=${WRITE_FACTS:-2000}
WRITES=${WRITES:-2000}
QUERY_FACTS=${QUERY_FACTS:-50000}
QUERIES=${QUERIES:-2000}

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

echo "query corpus: $QUERY_FACTS facts per binary" >&2
for b in old new; do
	"$work/lat" -prefill "$QUERY_FACTS" -- $(serve $b "$work/q-$b") 2>/dev/null >/dev/null
done

for r in $(seq "$ROUNDS"); do
	for b in old new; do
		rm -rf "$work/w-$b"
		line=$("$work/lat" -prefill "$WRITE_FACTS" -writes "$WRITES" -- $(serve $b "$work/w-$b") 2>/dev/null)
		field writes_p50_ms "$line" >>"$work/writes-$b"
		line=$("$work/lat" -queries "$QUERIES" -topics $((QUERY_FACTS / 100)) -- $(serve $b "$work/q-$b") 2>/dev/null)
		field queries_p50_ms "$line" >>"$work/queries-$b"
	done
	echo "round $r: store_fact p50 old $(tail -1 "$work/writes-old") new $(tail -1 "$work/writes-new")," \
		"query_facts p50 old $(tail -1 "$work/queries-old") new $(tail -1 "$work/queries-new") (ms)" >&2
done

for fig in writes queries; do
	o=$(median <"$work/$fig-old")
	n=$(median <"$work/$fig-new")
	case $fig in
	writes) label="stdio store_fact p50 at $WRITE_FACTS facts" ;;
	queries) label="stdio query_facts p50 at $QUERY_FACTS facts" ;;
	esac
	echo "$label (median of $ROUNDS): old $o ms, new $n ms, old/new $(awk -v o="$o" -v n="$n" 'BEGIN {printf "%.2f", o/n}')"
done
