#!/usr/bin/env bash
# Builds the reference kustomize binary (the upstream CLI) from the Go module proxy for the
# differential tests in tests/kustomize_differential.rs. It lands in a cache outside the
# repository, keyed by version, so only the first run pays for the build.
#
# Prints the path of the kustomize binary on stdout. Nothing built here is ever part of the
# product: it is only the yardstick our engine's output is compared against.
set -euo pipefail

# The newest v5.8.x that builds from the module proxy (`go list -m -versions
# sigs.k8s.io/kustomize/kustomize/v5`). v5.8.3 is listed too, but it requires a kube-openapi
# pseudo-version the proxy refuses to serve (403), so it cannot be built. Bump deliberately:
# the differential tests take this binary as the truth. When the local go is older than the
# module's `go` line, the go command fetches a newer toolchain from the proxy (GOTOOLCHAIN=auto).
KUSTOMIZE_VERSION="${KUSTOMIZE_VERSION:-v5.8.2}"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
BIN_DIR="$CACHE_ROOT/kustomize-$KUSTOMIZE_VERSION"
BIN="$BIN_DIR/kustomize"

# True if the cached binary exists and reports the expected version. `go install pkg@version`
# stamps the module version into the build info, which `kustomize version` prints.
binary_ok() {
  [[ -x "$BIN" ]] && [[ "$("$BIN" version 2>/dev/null)" == "$KUSTOMIZE_VERSION" ]]
}

build_kustomize() {
  if binary_ok; then
    return
  fi
  command -v go >/dev/null || { log "go is required to build kustomize"; exit 1; }
  log "building kustomize $KUSTOMIZE_VERSION (first run only; takes a few minutes)"
  rm -rf "$BIN_DIR.tmp"
  mkdir -p "$BIN_DIR.tmp"
  trap 'rm -rf "$BIN_DIR.tmp"' RETURN
  (
    # Build outside any module so a go.mod/go.work in the caller's directory cannot interfere;
    # `go install pkg@version` resolves the module graph from the proxy by itself.
    cd "$BIN_DIR.tmp"
    export GOBIN="$BIN_DIR.tmp" GOWORK=off GOTOOLCHAIN=auto GOFLAGS="${GOFLAGS:-} -trimpath"
    go install -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" >&2
  )
  rm -rf "$BIN_DIR"
  mv "$BIN_DIR.tmp" "$BIN_DIR"
}

# Serialise concurrent installs (several test binaries may ask for kustomize at once). A lock
# file of its own: install-binaries.sh holds .install.lock for as long as it builds Kubernetes.
hold_lock install-kustomize
build_kustomize
binary_ok || { log "built binary does not report kustomize $KUSTOMIZE_VERSION (got: $("$BIN" version 2>&1 || true))"; exit 1; }
echo "$BIN"
