#!/usr/bin/env bash
# Builds Flux's own kustomize-controller (the Go implementation) from the Go module proxy, for the
# side-by-side benchmark in benches/controllers.rs. Nothing built here is ever part of the product.
#
# Usage: tests/bench/install-flux-controller.sh
# stdout: the path of the cached binary (only that). Everything else goes to stderr.
# Environment: FLUX_KC_VERSION (default v1.9.5: a kustomize-controller release of the v1.9 line
#              that Flux 2.9 ships; v1.9.6 needs kustomize-controller/api v1.9.6 and
#              fluxcd/pkg/kustomize v1.35.7, which the module proxy reachable here refuses),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
#
# `go install module@version` refuses modules whose go.mod has replace directives, and this one
# replaces its own API module with the local path ./api (absent from the module zip). So: download
# the module source, copy it to a temporary directory, point that replace at the published API
# module of the same version, and `go build .` (the main package is the module root).
set -euo pipefail

VERSION="${FLUX_KC_VERSION:-v1.9.5}"
MODULE="github.com/fluxcd/kustomize-controller"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/flux-kustomize-controller-$VERSION"
BIN="$OUT_DIR/kustomize-controller"

# True if the cached binary exists and runs.
binary_ok() {
  [[ -x "$BIN" ]] && "$BIN" --help >/dev/null 2>&1
}

# Builds the binary into $OUT_DIR (atomically, via $OUT_DIR.tmp).
build() {
  command -v go >/dev/null || die "go is required to build Flux's kustomize-controller"
  local work
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  log "building $MODULE $VERSION (first run only; takes a few minutes)"
  copy_module "$MODULE@$VERSION" "$work"
  (
    cd "$work"
    # ./api is a separate module, published under the same version tag.
    go mod edit -dropreplace "$MODULE/api"
    go mod edit -require "$MODULE/api@$VERSION"
    export GOFLAGS=-mod=mod
    go mod download >&2
    rm -rf "$OUT_DIR.tmp"
    mkdir -p "$OUT_DIR.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT_DIR.tmp/kustomize-controller" . >&2
  )
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
}

hold_lock install-flux-controller
binary_ok || build
binary_ok || die "$BIN does not run after the build"
echo "$BIN"
