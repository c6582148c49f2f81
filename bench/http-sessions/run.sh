#!/bin/sh
# run.sh [CRUX_BIN] [N] [extra crux serve flags...]: starts CRUX_BIN
# (default: crux built from this tree) as crux serve --http on a free
# loopback port with a fresh data directory and one token, sends it N
# (default 38000) initialize requests with ./bench/http-sessions, and prints
# the server's RSS before and after.
set -eu
cd "$(dirname "$0")/../.."
bin=${1:-}
n=${2:-38000}
[ $# -gt 2 ] && shift 2 || set --
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
if [ -z "$bin" ]; then
	bin=$tmp/crux
	go build -o "$bin" ./cmd/crux
fi
token=bench-token-0123456789abcdef
port=$(( 20000 + $$ % 20000 ))
CRUX_AGENT_TOKENS="bench=$token" "$bin" serve --http 127.0.0.1:$port --data "$tmp/data" "$@" 2>"$tmp/log" &
pid=$!
for _ in $(seq 50); do
	grep -q "serving MCP over HTTP" "$tmp/log" 2>/dev/null && break
	sleep 0.2
done
go run ./bench/http-sessions -url "http://127.0.0.1:$port/mcp" -token "$token" -pid "$pid" -n "$n"
