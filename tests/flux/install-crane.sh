#!/usr/bin/env bash
# Builds crane (go-containerregistry's CLI) from the Go module proxy: its `crane registry serve`
# is the OCI registry on loopback that `flux push artifact` publishes to and source-controller
# pulls OCIRepository artifacts from. Test infrastructure only; nothing built here ships.
#
# Usage: tests/flux/install-crane.sh
# stdout: the path of the cached binary (only that). Everything else goes to stderr.
# Environment: CRANE_VERSION (default v0.22.1), KC_TEST_CACHE (cache root, default
#              ~/.cache/kustomize-controller-tests).
set -euo pipefail

VERSION="${CRANE_VERSION:-v0.22.1}"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/crane-$VERSION"
BIN="$OUT_DIR/crane"

binary_ok() {
  [[ -x "$BIN" ]] && "$BIN" version >/dev/null 2>&1
}

build() {
  command -v go >/dev/null || die "go is required to build crane"
  log "building crane $VERSION (first run only)"
  rm -rf "$OUT_DIR.tmp"
  mkdir -p "$OUT_DIR.tmp"
  CGO_ENABLED=0 GOBIN="$OUT_DIR.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/google/go-containerregistry/cmd/crane@$VERSION" >&2
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
}

hold_lock install-crane
binary_ok || build
binary_ok || die "$BIN does not run after the build"
echo "$BIN"
