#!/usr/bin/env bash
# Starts (idempotently) Flux's source-controller and a Git server beside a control plane that
# up.sh runs, so that this controller's input comes from its real producer: source-controller
# clones the Git repositories the tests and the demo commit to, and serves the artifacts from its
# storage on loopback, exactly as in a cluster (where it serves them from its Service).
#
# Usage: tests/flux/source-up.sh STATE_DIR        (up.sh calls it; STATE_DIR holds the kubeconfig)
#
# - source-controller (tests/flux/install-source-controller.sh) runs with the arguments of Flux's
#   own Deployment (--watch-all-namespaces, --log-level=info, --storage-path, --storage-adv-addr),
#   with its storage, metrics and probes on free 127.0.0.1 ports and RUNTIME_NAMESPACE=flux-system;
#   every CRD of its module (the source kinds and the Helm kinds) is installed first. It leaves
#   alone the sources labelled kc-test/forged-artifact (--watch-label-selector): those whose
#   artifact a test forges (a bad digest, a hostile tarball) from its own artifact server.
# - The Git server (tests/flux/git-server.py: Git's smart HTTP protocol via git http-backend)
#   serves every bare repository under STATE_DIR/flux/git as http://127.0.0.1:<port>/<name>.git.
# - An OCI registry (crane registry serve, tests/flux/install-crane.sh) on another free port, that
#   `flux push artifact` publishes to and source-controller pulls OCIRepository artifacts from.
# - Written for callers: STATE_DIR/flux/git-root (the directory to create bare repositories in),
#   STATE_DIR/flux/git-url (the URL prefix) and STATE_DIR/flux/oci-host (the registry's
#   host:port). Pid files and logs are in STATE_DIR/flux/, so down.sh stops all three.
# Environment: FLUX_SC_VERSION, KC_TEST_CACHE (see install-source-controller.sh).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$REPO_ROOT/tests/controlplane/lib.sh"

(($# == 1)) || die "usage: source-up.sh STATE_DIR"
STATE_DIR="$(cd "$1" && pwd)"
KUBECONFIG_FILE="$STATE_DIR/kubeconfig"
KUBECTL="$STATE_DIR/bin/kubectl"
FLUX_DIR="$STATE_DIR/flux"
GIT_ROOT="$FLUX_DIR/git"
mkdir -p "$FLUX_DIR/storage" "$GIT_ROOT"
[[ -s "$KUBECONFIG_FILE" && -x "$KUBECTL" ]] || die "no control plane in $STATE_DIR (run up.sh)"
kubectl_admin() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

SC_DIR="$(bash "$SCRIPT_DIR/install-source-controller.sh" </dev/null 9>&- 8>&-)" \
  || die "install-source-controller.sh failed (see its messages above)"
CRANE="$(bash "$SCRIPT_DIR/install-crane.sh" </dev/null 9>&- 8>&-)" \
  || die "install-crane.sh failed (see its messages above)"

# start_detached NAME CMD...: runs CMD in its own session, logging to FLUX_DIR/NAME.log.
start_detached() {
  local name="$1" pid i
  shift
  setsid nohup "$@" </dev/null >>"$FLUX_DIR/$name.log" 2>&1 9>&- 8>&- 7>&- &
  pid="$!"
  echo "$pid" >"$FLUX_DIR/$name.pid"
  # Until the child has exec'd its command, its command line is this script's, which does
  # not name $FLUX_DIR, and is_running would call it gone: wait for the exec (or the exit).
  for ((i = 0; i < 100; i++)); do
    is_running "$FLUX_DIR" "$name" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
}

# answers URL: true if URL answers 2xx within 2 s.
answers() {
  curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
}

# responds URL: true if something answers HTTP on URL within 2 s, whatever the status.
responds() {
  curl -sS -o /dev/null --max-time 2 "$1" 2>/dev/null
}

# wait_until NAME URL: waits up to 60 s for URL, failing with NAME's log if NAME exits.
wait_until() {
  local name="$1" url="$2" deadline=$((SECONDS + 60))
  until answers "$url"; do
    is_running "$FLUX_DIR" "$name" || die "$name exited: $(tail -n 20 "$FLUX_DIR/$name.log")"
    ((SECONDS < deadline)) || die "$name does not answer on $url after 60 s: $(tail -n 20 "$FLUX_DIR/$name.log")"
    sleep 0.2
  done
}

ensure_git_server() {
  # The server answers 404 on / (no repository there): any answer will do.
  if is_running "$FLUX_DIR" git-server && [[ -s "$FLUX_DIR/git-url" ]] \
    && responds "$(<"$FLUX_DIR/git-url")/"; then
    return
  fi
  stop_process "$FLUX_DIR" git-server 5
  local port
  read -r port <<<"$(free_ports 1)"
  start_detached git-server python3 "$SCRIPT_DIR/git-server.py" "$GIT_ROOT" "$port"
  local deadline=$((SECONDS + 30))
  until responds "http://127.0.0.1:$port/"; do
    is_running "$FLUX_DIR" git-server || die "the Git server exited: $(tail -n 20 "$FLUX_DIR/git-server.log")"
    ((SECONDS < deadline)) || die "the Git server does not answer on 127.0.0.1:$port after 30 s"
    sleep 0.2
  done
  echo "$GIT_ROOT" >"$FLUX_DIR/git-root"
  echo "http://127.0.0.1:$port" >"$FLUX_DIR/git-url"
  log "Git server on http://127.0.0.1:$port serving $GIT_ROOT"
}

ensure_oci_registry() {
  if is_running "$FLUX_DIR" oci-registry && [[ -s "$FLUX_DIR/oci-host" ]] \
    && answers "http://$(<"$FLUX_DIR/oci-host")/v2/"; then
    return
  fi
  stop_process "$FLUX_DIR" oci-registry 5
  local port
  read -r port <<<"$(free_ports 1)"
  mkdir -p "$FLUX_DIR/oci"
  start_detached oci-registry "$CRANE" registry serve --address "127.0.0.1:$port" --disk "$FLUX_DIR/oci"
  wait_until oci-registry "http://127.0.0.1:$port/v2/"
  echo "127.0.0.1:$port" >"$FLUX_DIR/oci-host"
  log "OCI registry on 127.0.0.1:$port"
}

install_source_crds() {
  local files=() f
  for f in "$SC_DIR"/crds/*.yaml; do files+=(-f "$f"); done
  kubectl_admin apply --server-side --force-conflicts --field-manager=kustomize-controller-tests \
    -o name "${files[@]}" >/dev/null || die "applying source-controller's CRDs failed"
  kubectl_admin wait --for=condition=Established --timeout=60s crd -l app.kubernetes.io/component=source-controller >/dev/null 2>&1 \
    || kubectl_admin wait --for=condition=Established --timeout=60s \
      crd/gitrepositories.source.toolkit.fluxcd.io crd/helmrepositories.source.toolkit.fluxcd.io >/dev/null \
    || die "source-controller's CRDs did not become Established within 60 s"
  kubectl_admin create namespace flux-system --dry-run=client -o yaml \
    | kubectl_admin apply --server-side -f - >/dev/null
}

ensure_source_controller() {
  if is_running "$FLUX_DIR" source-controller && [[ -s "$FLUX_DIR/source-controller.health" ]] \
    && answers "$(<"$FLUX_DIR/source-controller.health")/readyz"; then
    return
  fi
  stop_process "$FLUX_DIR" source-controller 10
  local storage metrics health
  # A restart keeps the ports: the artifact URLs in the sources' status stay valid.
  if [[ -s "$FLUX_DIR/source-controller.ports" ]]; then
    read -r storage metrics health <"$FLUX_DIR/source-controller.ports"
  else
    read -r storage metrics health <<<"$(free_ports 3)"
    echo "$storage $metrics $health" >"$FLUX_DIR/source-controller.ports"
  fi
  KUBECONFIG="$KUBECONFIG_FILE" RUNTIME_NAMESPACE=flux-system TMPDIR="$FLUX_DIR" \
    start_detached source-controller "$SC_DIR/source-controller" \
    --watch-all-namespaces --log-level=info --log-encoding=console \
    --watch-label-selector='!kc-test/forged-artifact' \
    --storage-path="$FLUX_DIR/storage" \
    --storage-addr="127.0.0.1:$storage" --storage-adv-addr="127.0.0.1:$storage" \
    --metrics-addr="127.0.0.1:$metrics" --health-addr="127.0.0.1:$health"
  echo "http://127.0.0.1:$health" >"$FLUX_DIR/source-controller.health"
  wait_until source-controller "http://127.0.0.1:$health/readyz"
  log "source-controller $(basename "$SC_DIR") running, artifacts on http://127.0.0.1:$storage"
}

ensure_git_server
ensure_oci_registry
install_source_crds
ensure_source_controller
