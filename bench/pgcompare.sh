#!/bin/sh
# pgcompare.sh puts the core's benchmarks on PostgreSQL beside the same
# benchmarks on bbolt, in one run on one machine: store_fact from one
# caller and from 32, and query_facts by keyword over 100,000 facts. It
# prints each figure's median for both backends and their ratio
# (postgres / bbolt).
#
#	CRUX_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
#		bench/pgcompare.sh [count] [facts] [old-commit]
#
# count defaults to 5, facts to 100000. With old-commit, the PostgreSQL
# benchmarks of that commit (exported with git archive) run too, beside
# this tree's, and the ratio new / old is printed as well. The test
# binaries are built once; each round runs every benchmark on bbolt, then
# on PostgreSQL (old, then new), so that all see the same noise. The query corpora are filled once (a few minutes for
# PostgreSQL) and kept for the rounds: the bbolt one in a temporary
# directory, the PostgreSQL one in a schema of its own (dropped at the end
# with psql). To keep them for later runs, set CRUX_BENCH_CORPUS_DIR (a
# directory) and CRUX_BENCH_PG_CORPUS (a schema name prefix) yourself: the
# script then neither makes nor removes them. Writes are durable on both (bbolt fsyncs every group commit,
# PostgreSQL commits with its synchronous_commit, on by default).
set -eu
count=${1:-5}
facts=${2:-100000}
old=${3:-}
: "${CRUX_TEST_POSTGRES:?set CRUX_TEST_POSTGRES to the PostgreSQL server to use}"
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
keep=${CRUX_BENCH_PG_CORPUS:+yes}
corpus=${CRUX_BENCH_PG_CORPUS:-crux_bench_corpus_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')}
corpusdir=${CRUX_BENCH_CORPUS_DIR:-$tmp/corpus}
cleanup() {
	if [ -z "$keep" ]; then
		psql -q "$CRUX_TEST_POSTGRES" -c "DROP SCHEMA IF EXISTS ${corpus}_$facts CASCADE" >/dev/null 2>&1 ||
			echo "pgcompare: could not drop schema ${corpus}_$facts" >&2
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$corpusdir"
(cd "$root/bench" && go test -c -o "$tmp/bench.test" .)
backends="bolt pg"
if [ -n "$old" ]; then
	mkdir "$tmp/old"
	git -C "$root" archive "$old" | tar -x -C "$tmp/old"
	(cd "$tmp/old/bench" && go test -c -o "$tmp/old.test" .)
	backends="bolt pgold pg"
fi
export CRUX_BENCH_CORPUS_DIR="$corpusdir" CRUX_BENCH_PG_CORPUS="$corpus" CRUX_BENCH_PG_FACTS="$facts"

run() { # run benchmark-regexp benchtime [binary]
	(cd "$root/bench" && "${3:-$tmp/bench.test}" -test.run '^$' -test.bench "$1" -test.benchtime "$2" -test.count 1)
}

# Fill both corpora before the first timed round.
run "^Benchmark(Postgres)?QueryFactsByKeyword\$/^facts=$facts\$" 1x >"$tmp/out" || {
	cat "$tmp/out" >&2
	exit 1
}

# label:bolt-benchmark:postgres-benchmark:benchtime:metric
set -- \
	"store_fact-1:StoreFactSequential:PostgresStoreFactSequential:3s:facts/s" \
	"store_fact-32:StoreFact32Concurrent:PostgresStoreFact32Concurrent:3s:facts/s" \
	"query_facts-p50:QueryFactsByKeyword/facts=$facts:PostgresQueryFactsByKeyword/facts=$facts:2000x:p50-µs" \
	"query_facts-p99:QueryFactsByKeyword/facts=$facts:PostgresQueryFactsByKeyword/facts=$facts:2000x:p99-µs"
i=0
while [ "$i" -lt "$count" ]; do
	for spec in "$@"; do
		label=${spec%%:*}
		rest=${spec#*:}
		bolt=${rest%%:*}
		rest=${rest#*:}
		pg=${rest%%:*}
		rest=${rest#*:}
		bt=${rest%%:*}
		metric=${rest#*:}
		case $label in
		query_facts-p99) continue ;; # read from the p50 run's output
		esac
		for backend in $backends; do
			name=$pg bin=$tmp/bench.test
			case $backend in
			bolt) name=$bolt ;;
			pgold) bin=$tmp/old.test ;;
			esac
			sub=${name#*/}
			top=${name%%/*}
			pat="^Benchmark$top\$"
			[ "$sub" != "$name" ] && pat="$pat/^$sub\$"
			run "$pat" "$bt" "$bin" >"$tmp/out"
			for m in "$metric" p99-µs; do
				l=$label
				[ "$m" = p99-µs ] && { [ "$metric" = p50-µs ] || continue; l=query_facts-p99; }
				awk -v b="$backend" -v m="$m" '$1 ~ /^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == m) print b, $i }' "$tmp/out" >>"$tmp/$l"
			done
		done
	done
	i=$((i + 1))
done

for spec in "$@"; do
	label=${spec%%:*}
	metric=${spec##*:}
	awk -v label="$label" -v metric="$metric" '
		{ v[$1, ++n[$1]] = $2 }
		function median(t,   i, j, x, k, a) {
			k = n[t]
			for (i = 1; i <= k; i++) a[i] = v[t, i]
			for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
			return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
		}
		END {
			o = median("bolt"); w = median("pg")
			printf "%-16s %-9s bbolt %9.1f  postgres %9.1f  postgres/bbolt %6.3f", label, metric, o, w, (o ? w/o : 0)
			if (n["pgold"]) { p = median("pgold"); printf "  postgres-old %9.1f  new/old %6.3f", p, (p ? w/p : 0) }
			printf "  (median of %d each)\n", n["pg"]
		}' "$tmp/$label"
done
