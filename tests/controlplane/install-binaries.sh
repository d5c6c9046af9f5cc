#!/usr/bin/env bash
# Builds the test control plane's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kubectl, and kwok for fake nodes and kubelets) from the Go module proxy
# and fetches Flux's source CRDs from the source-controller module. Everything lands in a
# cache outside the repository, keyed by version, so only the first run pays for the build.
#
# Prints the cache directory on stdout. Nothing built here is ever part of the product.
# The go commands' output goes to $CACHE_ROOT/install-binaries.log; stderr gets one line when a
# step starts and one when it ends (and the log's last 30 lines if it fails).
#
# Usage: install-binaries.sh           build what is missing, print the cache directory
#        install-binaries.sh --check   only check that what a build needs is installed (nothing,
#                                      when everything is cached); one sentence and exit 1 if not
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.6}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
CRD_DIR="$CACHE_ROOT/source-controller-$SOURCE_CONTROLLER_VERSION"
KWOK_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION"
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The Go toolchain the Kubernetes v1.35 build needs (the `go` line of the wrapper module's go.mod).
GO_MIN_VERSION=1.25.0
LOG="$CACHE_ROOT/install-binaries.log"
STEPS=3

log() { echo "install-binaries: $*" >&2; }

# fail MESSAGE: logs MESSAGE as an error and exits 1.
fail() {
  log "error: $*"
  exit 1
}

# True if the cached binaries exist and carry the right version stamp (earlier versions of this
# script built them without one: they reported v0.0.0-master and an empty major/minor).
binaries_ok() {
  local cmd
  for cmd in "${K8S_COMMANDS[@]}" etcd; do
    [[ -x "$BIN_DIR/$cmd" ]] || return 1
  done
  [[ "$("$BIN_DIR/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]
}

# True if kwok and its stages are cached.
kwok_ok() {
  [[ -x "$KWOK_DIR/kwok" ]] && compgen -G "$KWOK_DIR/stages/*.yaml" >/dev/null
}

# True if the source-controller CRDs are cached.
source_crds_ok() {
  compgen -G "$CRD_DIR/*.yaml" >/dev/null
}

# check_prerequisites: nothing is needed when everything is cached; otherwise python3 and a go of
# at least GO_MIN_VERSION. Exits 1 with one sentence naming what is missing.
check_prerequisites() {
  if binaries_ok && kwok_ok && source_crds_ok; then
    return 0
  fi
  local what="building the control plane's binaries (first run only)" have
  command -v go >/dev/null 2>&1 || fail "$what needs go $GO_MIN_VERSION or newer, not found on PATH: install Go (https://go.dev/dl/) and rerun"
  command -v python3 >/dev/null 2>&1 || fail "$what needs python3, not found on PATH: install it and rerun"
  have="$(cd / && go env GOVERSION 2>/dev/null)" || have="" # go1.26.8
  have="${have#go}"
  have="${have%%[!0-9.]*}"
  [[ -n "$have" && "$(printf '%s\n%s\n' "$GO_MIN_VERSION" "$have" | sort -V | head -n 1)" == "$GO_MIN_VERSION" ]] \
    || fail "$what needs go $GO_MIN_VERSION or newer, but go on PATH is ${have:-of unknown version}: install a newer Go (https://go.dev/dl/) and rerun"
}

# run_step N TITLE NOTE FUNCTION: runs FUNCTION with stdout and stderr in $LOG (emptied by the
# first step of a run), with one line on stderr before and one after; on failure prints the
# log's last 30 lines and exits 1.
run_step() {
  local n="$1" title="$2" note="$3" fn="$4" start=$SECONDS rc=0
  if [[ -z "${LOG_STARTED:-}" ]]; then
    : >"$LOG"
    LOG_STARTED=1
  fi
  log "[$n/$STEPS] $title ($note; log: $LOG)"
  echo "=== [$n/$STEPS] $title, $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$LOG"
  # In the background, so that set -e holds inside FUNCTION (it would not under `if` or `||`).
  "$fn" </dev/null >>"$LOG" 2>&1 &
  wait "$!" || rc=$?
  if ((rc != 0)); then
    log "[$n/$STEPS] failed after $((SECONDS - start)) s (exit status $rc); last 30 lines of $LOG:"
    tail -n 30 "$LOG" >&2
    exit 1
  fi
  log "[$n/$STEPS] done in $((SECONDS - start)) s"
}

# module_field MODULE@VERSION FIELD: downloads the module into the module cache and prints FIELD
# of `go mod download -json` (Dir, GoMod); fails with go's error message if the download fails.
module_field() {
  go mod download -json "$1" | python3 -c '
import json, sys
info = json.load(sys.stdin)
if info.get(sys.argv[1]):
    print(info[sys.argv[1]])
else:
    sys.exit("go mod download %s: %s" % (sys.argv[2], info.get("Error", "no " + sys.argv[1])))
' "$2" "$1"
}

build_kubernetes() {
  if binaries_ok; then
    return
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN

  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
  # paths; a consumer must pin each one to the published v0.X.Y instead.
  local gomod staging
  gomod="$(module_field "k8s.io/kubernetes@$K8S_VERSION" GoMod)"
  staging="v0.${K8S_VERSION#v1.}"
  {
    echo "module kcwrapper"
    echo
    echo "go $GO_MIN_VERSION"
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
  if source_crds_ok; then
    return
  fi
  local dir
  dir="$(module_field "github.com/fluxcd/source-controller@$SOURCE_CONTROLLER_VERSION" Dir)"
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
  if kwok_ok; then
    return
  fi
  rm -rf "$KWOK_DIR.tmp"
  mkdir -p "$KWOK_DIR.tmp/stages"
  GOBIN="$KWOK_DIR.tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  # kwok's own stages, as kwokctl configures them: nodes become Ready and keep a lease; pods
  # become Ready, Job pods complete, deleted pods go away; and the chaos stage that fails a
  # running pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true (failed Jobs).
  local dir stage
  dir="$(module_field "sigs.k8s.io/kwok@$KWOK_VERSION" Dir)"
  for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete \
    pod/chaos/pod-container-running-failed; do
    cp "$dir/kustomize/stage/$stage.yaml" "$KWOK_DIR.tmp/stages/"
  done
  chmod u+w "$KWOK_DIR.tmp/stages"/*.yaml
  rm -rf "$KWOK_DIR"
  mv "$KWOK_DIR.tmp" "$KWOK_DIR"
}

if [[ "${1:-}" == --check ]]; then
  check_prerequisites
  exit 0
fi
[[ $# -eq 0 ]] || fail "unknown argument '$1' (usage: install-binaries.sh [--check])"
check_prerequisites

mkdir -p "$CACHE_ROOT"
# Serialise concurrent installs into the same cache (e.g. up.sh for two state dirs).
exec 8>"$CACHE_ROOT/.install.lock"
if command -v flock >/dev/null && ! flock -n 8; then
  log "another install-binaries.sh is running; waiting for it"
  flock 8
fi
if ! binaries_ok; then
  run_step 1 "building ${K8S_COMMANDS[*]} etcd $K8S_VERSION" "first run only, ~4 min on 2 cores" \
    build_kubernetes
fi
binaries_ok || fail "the built binaries do not report Kubernetes $K8S_VERSION (see $LOG)"
if ! kwok_ok; then
  run_step 2 "building kwok $KWOK_VERSION" "first run only, ~1.5 min on 2 cores" build_kwok
fi
if ! source_crds_ok; then
  run_step 3 "fetching the source-controller $SOURCE_CONTROLLER_VERSION CRDs" "first run only" \
    fetch_source_crds
fi
echo "$CACHE_ROOT"
