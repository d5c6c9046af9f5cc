#!/usr/bin/env bash
# Builds helm from the Go module proxy, for tests/install.rs, which installs the chart in
# charts/kustomize-controller on the test cluster and renders it with `helm template`. It lands
# in a cache outside the repository, keyed by version, so only the first run pays for the
# build. Nothing built here is ever part of the product.
#
# Usage: tests/helm/install-helm.sh
# stdout: the path of the cached binary (only that). Everything else goes to stderr.
# Environment: HELM_VERSION (default v3.22.0),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
#
# `go install module@version` alone does not give the release binary: helm's Makefile stamps,
# with -ldflags, the full version (the source holds only "vMAJOR.MINOR", e.g. "v3.22") and the
# Kubernetes version `helm template` and `helm lint` assume without a cluster (derived from the
# k8s.io/client-go version in helm's go.mod; the source default is 1.20, which a chart with
# `kubeVersion: >=1.28.0-0` refuses). This script stamps both the same way, so a cached binary
# that reports anything but the full version is rebuilt.
set -euo pipefail

VERSION="${HELM_VERSION:-v3.22.0}"
MODULE="helm.sh/helm/v3"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/helm-$VERSION"
BIN="$OUT_DIR/helm"

# What the binary at $1 says its version is (v3.22.0; "v3.22" when built without stamping).
reported_version() {
  "$1" version --template '{{.Version}}' 2>/dev/null
}

# True if the cached binary exists and reports the expected, stamped version.
binary_ok() {
  [[ -x "$BIN" ]] && [[ "$(reported_version "$BIN")" == "$VERSION" ]]
}

# Prints "MAJOR MINOR" of the Kubernetes version helm's release build assumes: client-go
# v0.35.x in its go.mod gives "1 35", as helm's Makefile computes it.
kube_version_of_module() {
  local go_mod
  go_mod="$(GOWORK=off GOFLAGS= go mod download -json "$MODULE@$VERSION" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error","no GoMod")))')" ||
    return 1
  awk '$1 == "k8s.io/client-go" { split(substr($2, 2), v, "."); print v[1] + 1, v[2]; found = 1 }
       END { exit !found }' "$go_mod"
}

# Builds the binary into $OUT_DIR (atomically, via $OUT_DIR.tmp).
build() {
  command -v go >/dev/null || die "go is required to build helm"
  command -v python3 >/dev/null || die "python3 is required (to read go mod download's JSON)"
  local started=$SECONDS kube major minor
  kube="$(kube_version_of_module)" || die "cannot read k8s.io/client-go's version from $MODULE@$VERSION's go.mod"
  read -r major minor <<<"$kube"
  log "building $MODULE/cmd/helm $VERSION (first run only; takes a few minutes)"
  rm -rf "$OUT_DIR.tmp"
  mkdir -p "$OUT_DIR.tmp"
  GOWORK=off GOTOOLCHAIN=auto GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$OUT_DIR.tmp" \
    go install -trimpath \
    -ldflags "-s -w -X $MODULE/internal/version.version=$VERSION \
      -X $MODULE/pkg/lint/rules.k8sVersionMajor=$major -X $MODULE/pkg/lint/rules.k8sVersionMinor=$minor \
      -X $MODULE/pkg/chartutil.k8sVersionMajor=$major -X $MODULE/pkg/chartutil.k8sVersionMinor=$minor" \
    "$MODULE/cmd/helm@$VERSION" >&2 || {
    rm -rf "$OUT_DIR.tmp"
    die "go install $MODULE/cmd/helm@$VERSION failed"
  }
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
  log "built $BIN in $((SECONDS - started)) s ($(du -h "$BIN" | cut -f1); assumes Kubernetes v$major.$minor)"
}

# Serialise concurrent installs, with a lock file of this script's own (the other install
# scripts hold theirs while they build).
hold_lock install-helm
binary_ok || build
binary_ok || die "$BIN is not helm $VERSION (reports: $(reported_version "$BIN" || true))"
echo "$BIN"
