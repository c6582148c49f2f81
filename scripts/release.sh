#!/usr/bin/env bash
# Builds the crux command for every release platform: linux, darwin and
# windows, each on amd64 and arm64, as static binaries (CGO_ENABLED=0)
# with -trimpath, stamped with the version and the VCS revision that crux
# version prints. The binaries go to OUT (default dist/), named
# crux-VERSION-GOOS-GOARCH[.exe], with SHA256SUMS beside them.
#
# Usage: scripts/release.sh [VERSION]
#   VERSION defaults to `git describe --tags --always --dirty`.
#   OUT=dir sets the output directory.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
revision="$(git rev-parse HEAD 2>/dev/null || true)"
out="${OUT:-dist}"
mkdir -p "$out"

ldflags="-s -w -X main.version=$version"
if [ -n "$revision" ]; then
  ldflags="$ldflags -X main.revision=$revision"
fi

for goos in linux darwin windows; do
  for goarch in amd64 arm64; do
    ext=""
    [ "$goos" = windows ] && ext=".exe"
    bin="$out/crux-$version-$goos-$goarch$ext"
    echo "building $bin"
    CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" \
      go build -trimpath -ldflags "$ldflags" -o "$bin" ./cmd/crux
  done
done

(cd "$out" && sha256sum crux-"$version"-* > SHA256SUMS)
echo "wrote $out/SHA256SUMS"
