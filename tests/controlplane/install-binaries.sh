#!/usr/bin/env bash
# Builds the test control plane's binaries (kube-apiserver, etcd, kubectl) from the Go module
# proxy and fetches Flux's source CRDs from the source-controller module. Everything lands in a
# cache outside the repository, keyed by version, so only the first run pays for the build.
#
# Prints the cache directory on stdout. Nothing built here is ever part of the product.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.6}"
CACHE_ROOT="${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
CRD_DIR="$CACHE_ROOT/source-controller-$SOURCE_CONTROLLER_VERSION"

log() { echo "install-binaries: $*" >&2; }

build_kubernetes() {
  if [[ -x "$BIN_DIR/kube-apiserver" && -x "$BIN_DIR/etcd" && -x "$BIN_DIR/kubectl" ]]; then
    return
  fi
  command -v go >/dev/null || { log "go is required to build kube-apiserver"; exit 1; }
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "building kube-apiserver, kubectl and etcd $K8S_VERSION (first run only; takes a while)"

  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
  # paths; a consumer must pin each one to the published v0.X.Y instead.
  local gomod staging
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  staging="v0.${K8S_VERSION#v1.}"
  {
    echo "module kcwrapper"
    echo
    echo "go 1.25.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" \
      | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$work/go.mod"
  mkdir -p "$work/etcd"
  cat >"$work/etcd/main.go" <<'GO'
// Command etcd runs the etcd server that kube-apiserver's own go.mod pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (
    cd "$work"
    export GOFLAGS=-mod=mod
    go get "k8s.io/kubernetes@$K8S_VERSION" >&2
    go mod tidy >&2 || true
    mkdir -p "$BIN_DIR.tmp"
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR.tmp/kubectl" k8s.io/kubernetes/cmd/kubectl >&2
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR.tmp/etcd" ./etcd >&2
  )
  rm -rf "$BIN_DIR"
  mv "$BIN_DIR.tmp" "$BIN_DIR"
}

fetch_source_crds() {
  if compgen -G "$CRD_DIR/*.yaml" >/dev/null; then
    return
  fi
  log "fetching source-controller $SOURCE_CONTROLLER_VERSION CRDs"
  local dir
  dir="$(go mod download -json "github.com/fluxcd/source-controller@$SOURCE_CONTROLLER_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$CRD_DIR.tmp"
  for kind in gitrepositories ocirepositories buckets externalartifacts; do
    cp "$dir/config/crd/bases/source.toolkit.fluxcd.io_$kind.yaml" "$CRD_DIR.tmp/"
  done
  chmod u+w "$CRD_DIR.tmp"/*.yaml
  rm -rf "$CRD_DIR"
  mv "$CRD_DIR.tmp" "$CRD_DIR"
}

mkdir -p "$CACHE_ROOT"
build_kubernetes
fetch_source_crds
echo "$CACHE_ROOT"
