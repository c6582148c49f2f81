#!/bin/sh
# Stdio stall benchmark: one-at-a-time MCP calls against servers built with
# a Go runtime whose stop-the-world/syscall race window is widened (see
# docs/runtime-stdin-stw-race.md), with and without the workaround of
# mcpserver.StdioTransport, then the context switches of idle servers.
#
#   bench/stdio-stall/run.sh
#
# Environment (defaults in brackets):
#   CALLS        calls per run with the workaround [10000]
#   PLAIN_CALLS  calls for the run without it, where each stall costs a
#                second [2000]
#   GOGC         of the servers, low for frequent stop-the-worlds [10]
#   IDLE         how long each idle server is watched, 0 to skip [60s]
#   POLLER       1 also runs the poller alternative (Linux, pipes) [0]
#
# The toolchain's runtime/proc.go is copied to a temporary directory and
# patched there with widen-window.diff; the builds use it through
# go build -overlay, and GOROOT is not modified. The script exits 0 when the
# run without the workaround stalled and the runs with it did not.
set -eu

CALLS=${CALLS:-10000}
PLAIN_CALLS=${PLAIN_CALLS:-2000}
GOGC=${GOGC:-10}
IDLE=${IDLE:-60s}
POLLER=${POLLER:-0}
server_gogc=$GOGC
unset GOGC # the builds use the default

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
goroot=$(go env GOROOT)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp "$goroot/src/runtime/proc.go" "$work/proc.go"
if ! patch -s "$work/proc.go" <"$here/widen-window.diff"; then
	echo "run.sh: widen-window.diff does not apply to the runtime of $(go version)" >&2
	exit 1
fi
printf '{"Replace":{"%s":"%s"}}\n' "$goroot/src/runtime/proc.go" "$work/proc.go" >"$work/overlay.json"

echo "# $(go version), GOGC=$server_gogc, $(nproc 2>/dev/null || echo ?) CPUs"
echo "# building (the widened runtime compiles every package anew the first time)"
go build -o "$work/drive" ./bench/stdio-stall/drive
go build -o "$work/server" ./bench/stdio-stall/server
go build -o "$work/crux" ./cmd/crux
go build -overlay "$work/overlay.json" -o "$work/server-widened" ./bench/stdio-stall/server
go build -overlay "$work/overlay.json" -o "$work/crux-widened" ./cmd/crux

# run NAME DRIVE-FLAGS... -- COMMAND...: drive a fresh server, print the
# report lines prefixed with NAME; the server's log goes to $work/NAME.log.
# The driver's status is left in $status.
run() {
	name=$1
	shift
	status=0
	GOGC=$server_gogc "$work/drive" "$@" 2>"$work/$name.log" >"$work/$name.out" || status=$?
	sed "s/^/$name: /" "$work/$name.out"
	if [ "$status" -ne 0 ] && ! grep -q '^calls=' "$work/$name.out"; then
		echo "$name: driver failed:" >&2
		tail -5 "$work/$name.log" >&2
	fi
}
stalls() { sed -n 's/^calls=[0-9]* stalls=\([0-9]*\).*/\1/p' "$work/$1.out"; }

echo "# widened runtime, no workaround (stalls expected; each is cut short at 1 s)"
run widened-plain -n "$PLAIN_CALLS" -- "$work/server-widened" -data "$work/d1" -stdin plain
echo "# widened runtime, with the workaround"
run widened-guard -n "$CALLS" -- "$work/server-widened" -data "$work/d2" -stdin guard
run widened-crux-serve -n "$CALLS" -- "$work/crux-widened" serve --data "$work/d3" --agent bench
if [ "$POLLER" = 1 ]; then
	run widened-poller -n "$CALLS" -- "$work/server-widened" -data "$work/d4" -stdin poller
fi

if [ "$IDLE" != 0 ]; then
	echo "# normal runtime: 100 calls, then the server idles for $IDLE"
	run idle-plain -n 100 -idle "$IDLE" -- "$work/server" -data "$work/d5" -stdin plain
	run idle-guard -n 100 -idle "$IDLE" -- "$work/server" -data "$work/d6" -stdin guard
	run idle-crux-serve -n 100 -idle "$IDLE" -- "$work/crux" serve --data "$work/d7" --agent bench
fi

plain=$(stalls widened-plain)
guard=$(stalls widened-guard)
serve=$(stalls widened-crux-serve)
echo "# stalls: without the workaround ${plain:-?}, with it ${guard:-?} (server) and ${serve:-?} (crux serve)"
if [ "${plain:-0}" -gt 0 ] && [ "${guard:-1}" -eq 0 ] && [ "${serve:-1}" -eq 0 ]; then
	echo "PASS"
else
	echo "FAIL"
	exit 1
fi
