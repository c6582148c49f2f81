#!/bin/sh
# writepath.sh compares the write-path figures of this tree with those of an
# older commit, on the same machine in the same run, and prints each
# figure's median for both and their ratio (new / old).
#
#	bench/writepath.sh [old-commit] [count]
#
# old-commit defaults to 321de6c (before the write-path work), count to 5.
# The old commit is exported with git archive into a temporary directory and
# given this tree's bench/writepath_test.go; the two trees then run each
# benchmark in turn, count times, alternating so that both see the same
# noise.
set -eu
old=${1:-321de6c}
count=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git -C "$root" archive "$old" | tar -x -C "$tmp/old"
cp "$root/bench/writepath_test.go" "$tmp/old/bench/"

# name:benchtime:metric
set -- \
	"WritePathPagesPerCommit:200x:pages/commit" \
	"WritePathPagesPerCommit:200x:mean-pages/commit" \
	"WritePathFileBytes:1x:B/fact" \
	"WritePathFileBytesDurable:1x:B/fact" \
	"StoreFact32Concurrent:3s:facts/s" \
	"WritePathCPU:2000x:cpu-µs/op"
for spec in "$@"; do
	name=${spec%%:*}
	rest=${spec#*:}
	bt=${rest%%:*}
	metric=${rest#*:}
	out=$tmp/$name.$(echo "$metric" | tr / _)
	i=0
	while [ "$i" -lt "$count" ]; do
		for tree in old new; do
			dir=$root
			[ "$tree" = old ] && dir=$tmp/old
			(cd "$dir" && go test -run '^$' -bench "^Benchmark$name\$" -benchtime "$bt" -count 1 ./bench) |
				awk -v tree="$tree" -v m="$metric" '$1 ~ /^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == m) print tree, $i }' >>"$out"
		done
		i=$((i + 1))
	done
	awk -v name="$name" -v metric="$metric" '
		{ v[$1, ++n[$1]] = $2 }
		function median(t,   i, j, x, k, a) {
			k = n[t]
			for (i = 1; i <= k; i++) a[i] = v[t, i]
			for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
			return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
		}
		END {
			o = median("old"); w = median("new")
			printf "%-26s %-13s old %10.1f  new %10.1f  new/old %6.3f  (median of %d each)\n", name, metric, o, w, (o ? w/o : 0), n["new"]
		}' "$out"
done
