#!/usr/bin/env bash
# Builds Flux's source-controller from the Go module proxy, for the local control plane: the real
# producer of the artifacts this controller applies (GitRepository, OCIRepository, Bucket). Test
# infrastructure only; nothing built here is ever part of the product.
#
# Usage: tests/flux/install-source-controller.sh
# stdout: the cache directory (only that), holding `source-controller` and `crds/` (every CRD of
#         its module: the source kinds and the Helm kinds it also serves). Everything else goes to
#         stderr.
# Environment: FLUX_SC_VERSION (default v1.9.6), KC_TEST_CACHE (cache root, default
#              ~/.cache/kustomize-controller-tests).
#
# Why v1.9.6 and a replace: v1.10.0 and v1.10.1 need Go 1.27 and modules the module proxy reachable
# here refuses (fluxcd/pkg/artifact v0.27.1, cosign v3, lockedfile ...). v1.9.6 needs
# fluxcd/pkg/artifact v0.18.3, also refused; it is replaced by v0.18.0, which is served. Between
# the two, the artifact storage writes the same tarballs, digests and revisions (what this
# controller reads: status.artifact's url, revision and digest), which the e2e tests check against
# source-controller's own status. The source API module is published under the same version.
set -euo pipefail

VERSION="${FLUX_SC_VERSION:-v1.9.6}"
MODULE="github.com/fluxcd/source-controller"
ARTIFACT_REPLACEMENT="github.com/fluxcd/pkg/artifact@v0.18.0"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/flux-source-controller-$VERSION"
BIN="$OUT_DIR/source-controller"

# True if the cached binary exists and runs, and the CRDs are beside it.
installed() {
  [[ -x "$BIN" ]] && "$BIN" --help >/dev/null 2>&1 && compgen -G "$OUT_DIR/crds/*.yaml" >/dev/null
}

# Builds the binary and copies the module's CRDs into $OUT_DIR (atomically, via $OUT_DIR.tmp).
build() {
  command -v go >/dev/null || die "go is required to build Flux's source-controller"
  local work
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  log "building $MODULE $VERSION (first run only; takes a few minutes)"
  copy_module "$MODULE@$VERSION" "$work"
  rm -rf "$OUT_DIR.tmp"
  mkdir -p "$OUT_DIR.tmp/crds"
  cp "$work"/config/crd/bases/*.yaml "$OUT_DIR.tmp/crds/"
  (
    cd "$work"
    go mod edit -dropreplace "$MODULE/api"
    go mod edit -require "$MODULE/api@$VERSION"
    go mod edit -replace "github.com/fluxcd/pkg/artifact=$ARTIFACT_REPLACEMENT"
    export GOFLAGS=-mod=mod
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT_DIR.tmp/source-controller" . >&2
  )
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
}

hold_lock install-source-controller
installed || build
installed || die "$BIN does not run after the build"
echo "$OUT_DIR"
