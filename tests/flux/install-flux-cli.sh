#!/usr/bin/env bash
# Builds the `flux` CLI from the Go module proxy, for the e2e tests in tests/e2e/flux_cli.rs
# that drive this controller with Flux's own client (get, tree, events, suspend/resume,
# reconcile, diff). It lands in a cache outside the repository, keyed by version, so only the
# first run pays for the build. Nothing built here is ever part of the product.
#
# Usage: tests/flux/install-flux-cli.sh
# stdout: the path of the cached binary (only that). Everything else goes to stderr.
# Environment: FLUX_CLI_VERSION (default v2.9.5: the newest flux2 v2.x the module proxy reachable
#              here lists, and every dependency of it downloads; the Flux release whose
#              kustomize-controller v1.9 this project replaces),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
#
# `go install module@version` refuses flux2 because its go.mod has a `replace` directive, and the
# CLI embeds the install manifests (`//go:embed manifests/*.yaml` in cmd/flux), which upstream
# generates with `make` and which are not in the module zip. So: download the module source, copy
# it to a temporary directory, put one placeholder manifest where the generated ones would be
# (only `flux install` and `flux bootstrap` read them; the tests never call those), and
# `go build ./cmd/flux` there, with the version stamped as upstream's Makefile stamps it.
set -euo pipefail

VERSION="${FLUX_CLI_VERSION:-v2.9.5}"
MODULE="github.com/fluxcd/flux2/v2"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/flux-cli-$VERSION"
BIN="$OUT_DIR/flux"

# True if the cached binary exists and reports the expected version (`flux version --client`
# prints "flux: v2.9.5").
binary_ok() {
  [[ -x "$BIN" ]] && [[ "$("$BIN" version --client 2>/dev/null)" == "flux: $VERSION" ]]
}

# Prints the module's source directory in the module cache, downloading it if needed.
module_dir() {
  (
    cd "$1"
    GOWORK=off GOFLAGS= go mod download -json "$MODULE@$VERSION"
  ) | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))'
}

# Builds the binary into $OUT_DIR (atomically, via $OUT_DIR.tmp).
build() {
  command -v go >/dev/null || die "go is required to build the flux CLI"
  command -v python3 >/dev/null || die "python3 is required (to read go mod download's JSON)"
  local src work started
  started=$SECONDS
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  src="$(module_dir "$work")" || die "go mod download $MODULE@$VERSION failed"
  log "building $MODULE $VERSION from $src (first run only; takes a few minutes)"
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (
    cd "$work"
    mkdir -p cmd/flux/manifests
    printf '# placeholder: the install manifests are not embedded in this test build\n' \
      >cmd/flux/manifests/placeholder.yaml
    export GOWORK=off GOTOOLCHAIN=auto GOFLAGS=-mod=mod
    go mod download >&2
    rm -rf "$OUT_DIR.tmp"
    mkdir -p "$OUT_DIR.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.VERSION=${VERSION#v}" \
      -o "$OUT_DIR.tmp/flux" ./cmd/flux >&2
  ) || {
    rm -rf "$OUT_DIR.tmp"
    die "go build $MODULE/cmd/flux@$VERSION failed"
  }
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
  log "built $BIN in $((SECONDS - started)) s ($(du -h "$BIN" | cut -f1))"
}

# Serialise concurrent installs, with a lock file of this script's own (the other install
# scripts hold theirs while they build).
hold_lock install-flux-cli
binary_ok || build
binary_ok || die "$BIN does not report flux $VERSION (got: $("$BIN" version --client 2>&1 || true))"
echo "$BIN"
