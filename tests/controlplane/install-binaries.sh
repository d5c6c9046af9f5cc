#!/usr/bin/env bash
# Builds the test control plane's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kubectl, and kwok for fake nodes and kubelets) from the Go module proxy
# and fetches Flux's source CRDs from the source-controller module. Everything lands in a
# cache outside the repository, keyed by version, so only the first run pays for the build.
#
# Prints the cache directory on stdout. Nothing built here is ever part of the product.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.6}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
CRD_DIR="$CACHE_ROOT/source-controller-$SOURCE_CONTROLLER_VERSION"
KWOK_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION"
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

log() { echo "install-binaries: $*" >&2; }

# True if the cached binaries exist and carry the right version stamp (earlier versions of this
# script built them without one: they reported v0.0.0-master and an empty major/minor).
binaries_ok() {
  local cmd
  for cmd in "${K8S_COMMANDS[@]}" etcd; do
    [[ -x "$BIN_DIR/$cmd" ]] || return 1
  done
  [[ "$("$BIN_DIR/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]
}

build_kubernetes() {
  if binaries_ok; then
    return
  fi
  command -v go >/dev/null || { log "go is required to build kube-apiserver"; exit 1; }
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "building ${K8S_COMMANDS[*]} and etcd $K8S_VERSION (first run only; takes a while)"

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
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (
    cd "$work"
    export GOFLAGS=-mod=mod
    go get "k8s.io/kubernetes@$K8S_VERSION" >&2
    go mod tidy >&2 || true
    # Stamp the version the way hack/lib/version.sh does, so /version reports 1.35 (not 0.0.0).
    local ldflags="-s -w" major minor key val
    major="${K8S_VERSION#v}" && major="${major%%.*}"
    minor="${K8S_VERSION#v*.}" && minor="${minor%%.*}"
    for key in gitVersion=$K8S_VERSION gitMajor=$major gitMinor=$minor gitTreeState=clean \
      buildDate=1970-01-01T00:00:00Z; do
      val="${key#*=}" key="${key%%=*}"
      ldflags+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
    done
    rm -rf "$BIN_DIR.tmp"
    mkdir -p "$BIN_DIR.tmp"
    local cmd
    for cmd in "${K8S_COMMANDS[@]}"; do
      go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd" >&2
    done
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

# kwok simulates nodes and kubelets: pods are scheduled onto its fake nodes, run, and become
# Ready (or stay unready, or fail) as its Stage resources say.
build_kwok() {
  if [[ -x "$KWOK_DIR/kwok" ]] && compgen -G "$KWOK_DIR/stages/*.yaml" >/dev/null; then
    return
  fi
  log "building kwok $KWOK_VERSION (first run only)"
  rm -rf "$KWOK_DIR.tmp"
  mkdir -p "$KWOK_DIR.tmp/stages"
  GOBIN="$KWOK_DIR.tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  # kwok's own stages, as kwokctl configures them: nodes become Ready and keep a lease; pods
  # become Ready, Job pods complete, deleted pods go away; and the chaos stage that fails a
  # running pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true (failed Jobs).
  local dir stage
  dir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete \
    pod/chaos/pod-container-running-failed; do
    cp "$dir/kustomize/stage/$stage.yaml" "$KWOK_DIR.tmp/stages/"
  done
  chmod u+w "$KWOK_DIR.tmp/stages"/*.yaml
  rm -rf "$KWOK_DIR"
  mv "$KWOK_DIR.tmp" "$KWOK_DIR"
}

mkdir -p "$CACHE_ROOT"
# Serialise concurrent installs into the same cache (e.g. up.sh for two state dirs).
exec 8>"$CACHE_ROOT/.install.lock"
if command -v flock >/dev/null && ! flock -n 8; then
  log "another install-binaries.sh is running; waiting for it"
  flock 8
fi
build_kubernetes
binaries_ok || { log "built binaries do not report Kubernetes $K8S_VERSION"; exit 1; }
build_kwok
fetch_source_crds
echo "$CACHE_ROOT"
