#!/usr/bin/env bash
# Builds the reference sops and age tools from the Go module proxy. They make the SOPS test
# fixtures (tests/sops/generate-fixtures.sh) and serve as the truth our native decryption is
# compared against. They land in a cache outside the repository, keyed by version, so only the
# first run pays for the build.
#
# Prints the path of the sops binary on stdout; age, age-keygen and friends sit in the
# directory printed by `--age-dir` instead. Nothing built here is ever part of the product.
set -euo pipefail

# Pinned: the fixtures are regenerated with these exact versions. Bump deliberately. When the
# local go is older than a module's `go` line, the go command fetches a newer toolchain from
# the proxy (GOTOOLCHAIN=auto).
SOPS_VERSION="${SOPS_VERSION:-v3.13.3}"
AGE_VERSION="${AGE_VERSION:-v1.3.2}"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
SOPS_DIR="$CACHE_ROOT/sops-$SOPS_VERSION"
AGE_DIR="$CACHE_ROOT/age-$AGE_VERSION"
SOPS_BIN="$SOPS_DIR/sops"

# `sops --version` prints "sops 3.13.3" (no leading v); the version check against GitHub is
# switched off so the answer does not depend on the network.
sops_ok() {
  [[ -x "$SOPS_BIN" ]] &&
    [[ "$("$SOPS_BIN" --disable-version-check --version 2>/dev/null | head -n1)" == "sops ${SOPS_VERSION#v}" ]]
}

# `age --version` and `age-keygen --version` print the module version (e.g. "v1.3.2").
age_ok() {
  [[ -x "$AGE_DIR/age" && -x "$AGE_DIR/age-keygen" ]] &&
    [[ "$("$AGE_DIR/age" --version 2>/dev/null)" == "$AGE_VERSION" ]] &&
    [[ "$("$AGE_DIR/age-keygen" --version 2>/dev/null)" == "$AGE_VERSION" ]]
}

# go_install DIR PACKAGE@VERSION: builds into DIR.tmp, then swaps it in for DIR.
go_install() {
  local dir="$1" pkg="$2"
  command -v go >/dev/null || { log "go is required to build $pkg"; exit 1; }
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  (
    # Build outside any module so a go.mod/go.work in the caller's directory cannot interfere;
    # `go install pkg@version` resolves the module graph from the proxy by itself.
    cd "$dir.tmp"
    export GOBIN="$dir.tmp" GOWORK=off GOTOOLCHAIN=auto GOFLAGS="${GOFLAGS:-} -trimpath"
    go install -ldflags "-s -w" "$pkg" >&2
  ) || { rm -rf "$dir.tmp"; exit 1; }
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}

build_tools() {
  if ! sops_ok; then
    log "building sops $SOPS_VERSION (first run only; takes a minute or two)"
    go_install "$SOPS_DIR" "github.com/getsops/sops/v3/cmd/sops@$SOPS_VERSION"
  fi
  if ! age_ok; then
    log "building age $AGE_VERSION (first run only)"
    go_install "$AGE_DIR" "filippo.io/age/cmd/...@$AGE_VERSION"
  fi
}

if [[ "${1:-}" == "--age-dir" ]]; then
  want_age_dir=1
else
  want_age_dir=0
fi

# Serialise concurrent installs, with a lock file of this script's own (install-binaries.sh and
# install-kustomize.sh hold theirs while they build).
hold_lock install-sops-tools
build_tools
sops_ok || { log "built binary does not report sops $SOPS_VERSION (got: $("$SOPS_BIN" --disable-version-check --version 2>&1 || true))"; exit 1; }
age_ok || { log "built age tools do not report $AGE_VERSION (got: $("$AGE_DIR/age" --version 2>&1 || true))"; exit 1; }
if ((want_age_dir)); then
  echo "$AGE_DIR"
else
  echo "$SOPS_BIN"
fi
