#!/usr/bin/env bash
# Builds HashiCorp Vault from the Go module proxy, for the tests that decrypt SOPS files whose
# data key is wrapped by Vault's transit engine (`sops --hc-vault-transit`): they start
# `vault server -dev` on a free local port, mount transit, and encrypt with the real sops
# against it (see tests/keyservices/smoke.sh). It lands in a cache outside the repository, keyed
# by version, so only the first run pays for the build. Nothing built here is ever part of the
# product.
#
# Usage: tests/keyservices/install-vault.sh
# stdout: the path of the cached binary (only that). Everything else goes to stderr; go's own
#         output goes to <cache root>/vault-<version>.build.log.
# Environment: VAULT_VERSION (default v1.21.4; the module proxy reachable here lists only
#              v1.1.2 and v1.21.4 of github.com/hashicorp/vault),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
#
# `go install module@version` refuses Vault because its go.mod has `replace` directives, among
# them ones pointing at nested modules of the same repository (./api, ./sdk, ./api/auth/...),
# which are not in the module zip. So: download the module source, copy it to a temporary
# directory, drop those directory replaces (the go.mod requires released versions of the same
# modules, api v1.22.0 and sdk v0.21.0 for v1.21.4, which the proxy serves), and `go build .`
# there (the main package is the module root).
#
# The released sdk is not the tree Vault v1.21.4 was built with: the release branch's sdk has
# `framework.Backend.ActivationFunc` without the trailing string argument sdk v0.21.0 has, and
# `keysutil.LockManager.RestorePolicy` returning the restored key's name as well as the error.
# No released sdk matches (v0.20.0 lacks the observation API v1.21.4 uses everywhere; the proxy
# reachable here refuses pseudo-versions of the repository's commits), so three call sites are
# adapted to sdk v0.21.0 (see patch_source); none is on the dev server's or transit's
# encrypt/decrypt path (the third only names the key in a `transit restore` observation).
#
# Built with Vault's own `minimal` build tag (what its Makefile's BUILD_MINIMAL sets): the core
# with in-memory and raft storage, the kv, pki, ssh and transit secrets engines and the approle,
# cert, jwt/oidc and userpass auth methods, without the cloud and database plugins that make
# most of the full build. The tests also log in through the Kubernetes auth method, so
# registry_min.go registers it, as the full build does (see add_kubernetes_auth). The transit
# engine is the same code in both builds; the minimal one builds in a fraction of the time.
#
# Built without the `ui` tag: the web UI assets come from a yarn build that is not in the module
# zip, and `vault server -dev` serves the API without them. The version is embedded from the
# source's version/VERSION file; the commit is stamped from the proxy's origin information, as
# upstream's release build does. The binary is large (about 350 MiB, stripped), and the first
# build fills the Go module cache with about 3 GiB of dependencies (cloud SDKs, mostly).
set -euo pipefail

VERSION="${VAULT_VERSION:-v1.21.4}"
MODULE="github.com/hashicorp/vault"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/vault-$VERSION-minimal"
BIN="$OUT_DIR/vault"
BUILD_LOG="$CACHE_ROOT/vault-$VERSION.build.log"

# What the binary at $1 says its version is: `vault version` prints
# "Vault v1.21.4 (<commit>), built <date>"; this prints the second word.
reported_version() {
  "$1" version 2>/dev/null | awk 'NR == 1 { print $2 }'
}

# True if the cached binary exists and reports the expected version.
binary_ok() {
  [[ -x "$BIN" ]] && [[ "$(reported_version "$BIN")" == "$VERSION" ]]
}

# Prints one field ($2) of `go mod download -json $MODULE@$VERSION`, run in directory $1.
module_field() {
  (
    cd "$1"
    GOWORK=off GOFLAGS='' go mod download -json "$MODULE@$VERSION"
  ) | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error"):
    sys.exit(d["Error"])
v = d
for k in sys.argv[1].split("."):
    v = v.get(k) or {}
print(v or sys.exit("no " + sys.argv[1]))' "$2"
}

# replace_once FILE OLD NEW: replaces the one occurrence of OLD in FILE (relative to the current
# directory) with NEW; fails if OLD does not occur exactly once.
replace_once() {
  python3 - "$@" <<'PY'
import sys
path, old, new = sys.argv[1:4]
with open(path) as f:
    text = f.read()
if text.count(old) != 1:
    sys.exit(f"{path}: expected one occurrence of {old!r}, found {text.count(old)}")
with open(path, "w") as f:
    f.write(text.replace(old, new))
PY
}

# Adapts the source in the current directory to the released sdk its go.mod requires (see the
# header). Only for the version these edits were written against; another version is built as is.
patch_source() {
  [[ "$VERSION" == v1.21.4 ]] || return 0
  replace_once vault/identity_store.go \
    'ActivationFunc: iStore.activateDeduplication,' \
    'ActivationFunc: func(ctx context.Context, req *logical.Request, _ string) error { return iStore.activateDeduplication(ctx, req) },'
  replace_once vault/logical_system_activation_flags.go \
    'b.idStoreBackend.ActivationFunc(ctx, nil)' \
    'b.idStoreBackend.ActivationFunc(ctx, nil, "")'
  replace_once builtin/logical/transit/path_restore.go \
    'restoredKeyName, err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)' \
    'restoredKeyName := keyName
	err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)'
}

# Registers the Kubernetes auth method in the minimal build's plugin registry (the full build's
# registry_full.go registers it under the same name).
add_kubernetes_auth() {
  grep -q 'func extendAddonPlugins(_ \*registry)' helper/builtinplugins/registry_min.go ||
    die "helper/builtinplugins/registry_min.go of $VERSION is not the one add_kubernetes_auth expects"
  cat >helper/builtinplugins/registry_min.go <<'GO'
//go:build minimal

package builtinplugins

import (
	credKube "github.com/hashicorp/vault-plugin-auth-kubernetes"
	"github.com/hashicorp/vault/helper/pluginconsts"
)

// extendAddonPlugins adds the Kubernetes auth method to the minimal registry (see
// tests/keyservices/install-vault.sh).
func extendAddonPlugins(reg *registry) {
	reg.credentialBackends[pluginconsts.AuthTypeKubernetes] = credentialBackend{Factory: credKube.Factory}
}
GO
}

# Size in bytes of directory $1 (0 if absent).
size_of() {
  if [[ -d "$1" ]]; then du -sb "$1" 2>/dev/null | cut -f1; else echo 0; fi
}

mib() { echo "$(($1 / 1048576)) MiB"; }

# Builds the binary into $OUT_DIR (atomically, via $OUT_DIR.tmp).
build() {
  command -v go >/dev/null || die "go is required to build vault"
  command -v python3 >/dev/null || die "python3 is required (to read go mod download's JSON)"
  local src work started commit modcache gocache mod_before cache_before
  started=$SECONDS
  modcache="$(go env GOMODCACHE)"
  gocache="$(go env GOCACHE)"
  mod_before="$(size_of "$modcache")"
  cache_before="$(size_of "$gocache")"
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  : >"$BUILD_LOG"
  log "building $MODULE $VERSION (first run only; takes a few minutes on 2 cores); go's output: $BUILD_LOG"

  log "step 1/5: downloading the module source"
  src="$(module_field "$work" Dir 2>>"$BUILD_LOG")" || die "go mod download $MODULE@$VERSION failed (see $BUILD_LOG)"
  commit="$(module_field "$work" Origin.Hash 2>>"$BUILD_LOG")" || commit=unknown
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"

  log "step 2/5: dropping go.mod's replaces of nested modules (./api, ./sdk, ...)"
  (
    cd "$work"
    local nested
    nested="$(GOWORK=off go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./") or r["New"]["Path"].startswith("../"):
        print(r["Old"]["Path"] + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else ""))')"
    local args=()
    for m in $nested; do
      echo "dropping replace of $m" >>"$BUILD_LOG"
      args+=("-dropreplace=$m")
    done
    [[ ${#args[@]} -eq 0 ]] || GOWORK=off go mod edit "${args[@]}"
  ) || die "go mod edit failed"

  log "step 3/5: adapting the source to the released sdk"
  (cd "$work" && patch_source && add_kubernetes_auth) 2>>"$BUILD_LOG" || die "adapting the source failed (see $BUILD_LOG)"

  export GOWORK=off GOTOOLCHAIN=auto GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
  # `go list -deps` fetches only the modules whose packages the binary imports; a bare
  # `go mod download` would also fetch every test dependency in the module graph.
  log "step 4/5: downloading the dependencies"
  (cd "$work" && go list -tags minimal -deps . >/dev/null) >>"$BUILD_LOG" 2>&1 ||
    die "downloading the dependencies failed (last lines of $BUILD_LOG follow)
$(tail -n 20 "$BUILD_LOG")"

  log "step 5/5: compiling (go build)"
  rm -rf "$OUT_DIR.tmp"
  mkdir -p "$OUT_DIR.tmp"
  (
    cd "$work"
    go build -tags minimal -trimpath -ldflags "-s -w -X $MODULE/version.GitCommit=$commit" \
      -o "$OUT_DIR.tmp/vault" .
  ) >>"$BUILD_LOG" 2>&1 || {
    rm -rf "$OUT_DIR.tmp"
    die "go build $MODULE@$VERSION failed (last lines of $BUILD_LOG follow)
$(tail -n 20 "$BUILD_LOG")"
  }
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
  log "built $BIN in $((SECONDS - started)) s: binary $(mib "$(stat -c %s "$BIN")"), go module cache" \
    "grew by $(mib $(($(size_of "$modcache") - mod_before))), go build cache by $(mib $(($(size_of "$gocache") - cache_before)))"
}

# Serialise concurrent installs, with a lock file of this script's own (the other install
# scripts hold theirs while they build).
hold_lock install-vault
binary_ok || build
binary_ok || die "$BIN is not vault $VERSION (reports: $(reported_version "$BIN" || true))"
echo "$BIN"
