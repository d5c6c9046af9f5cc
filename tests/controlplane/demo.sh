#!/usr/bin/env bash
# The README demo: a Kustomization applied by this controller against a local control plane, with
# source-controller faked by a static artifact server.
#
# Usage: tests/controlplane/demo.sh [STATE_DIR]      (default STATE_DIR: <repo>/.controlplane)
#
# Steps: up.sh; cargo build (debug by default); pack config/samples/demo/manifests/ into a
# reproducible tar.gz served by `python3 -m http.server` on a free 127.0.0.1 port; apply
# config/samples/demo/gitrepository.yaml and write its status.artifact (url, revision, digest, ...)
# by hand; run the controller; apply config/samples/demo/kustomization.yaml; wait for Ready.
# The controller and the artifact server are stopped on exit; the control plane keeps running
# (stop it with tests/controlplane/down.sh).
#
# Environment:
#   KC_DEMO_PROFILE          debug (default) or release: the cargo profile to build and run
#   KC_DEMO_CONTROLLER_BIN   use this controller binary instead of building one
#   KC_DEMO_CONTROLLER_ARGS  extra controller arguments (word-split), appended after the demo's own:
#                            --log-encoding=console --watch-all-namespaces=false
#                            --metrics-addr=127.0.0.1:<free> --health-addr=127.0.0.1:<free>
#   KC_DEMO_TIMEOUT          seconds to wait for the Kustomization to be Ready (default 120)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$SCRIPT_DIR/lib.sh"

SAMPLES="$REPO_ROOT/config/samples/demo"
PROFILE="${KC_DEMO_PROFILE:-debug}"
TIMEOUT="${KC_DEMO_TIMEOUT:-120}"
KUSTOMIZATION_CRD=kustomizations.kustomize.toolkit.fluxcd.io

for tool in python3 curl tar gzip sha256sum sha1sum cargo; do
  command -v "$tool" >/dev/null || die "'$tool' is required but not on PATH"
done
case "$PROFILE" in
  debug) cargo_profile_args=() ;;
  release) cargo_profile_args=(--release) ;;
  *) die "KC_DEMO_PROFILE must be debug or release, not '$PROFILE'" ;;
esac

# --- control plane ---------------------------------------------------------------------------------
STATE_ARG=("$@")
KUBECONFIG="$("$SCRIPT_DIR/up.sh" "${STATE_ARG[@]}")" || die "up.sh failed"
export KUBECONFIG
KUBECTL="$(dirname "$KUBECONFIG")/bin/kubectl"
[[ -x "$KUBECTL" ]] || die "$KUBECTL not found (up.sh should have linked it)"

"$KUBECTL" get crd "$KUSTOMIZATION_CRD" >/dev/null 2>&1 \
  || die "the $KUSTOMIZATION_CRD CRD is not installed: generate it into $REPO_ROOT/crds/ and rerun"

# --- controller binary -----------------------------------------------------------------------------
if [[ -n "${KC_DEMO_CONTROLLER_BIN:-}" ]]; then
  CONTROLLER="$KC_DEMO_CONTROLLER_BIN"
else
  log "building the controller (cargo build --bin kustomize-controller ${cargo_profile_args[*]})"
  (cd "$REPO_ROOT" && cargo build --bin kustomize-controller "${cargo_profile_args[@]}" </dev/null >&2) \
    || die "cargo build failed"
  CONTROLLER="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/$PROFILE/kustomize-controller"
fi
[[ -x "$CONTROLLER" ]] || die "controller binary $CONTROLLER not found or not executable"

# --- cleanup of everything this script starts (not the control plane) -------------------------------
WORK="$(mktemp -d)"
CONTROLLER_LOG="$WORK/controller.log"
server_pid=""
controller_pid=""
cleanup() {
  local rc=$?
  local pid killer
  for pid in "$controller_pid" "$server_pid"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      (sleep 5 && kill -KILL "$pid" 2>/dev/null) &
      killer=$!
      wait "$pid" 2>/dev/null || true
      kill "$killer" 2>/dev/null || true
    fi
  done
  if ((rc != 0)) && [[ -f "$CONTROLLER_LOG" ]]; then
    cp "$CONTROLLER_LOG" "$(dirname "$KUBECONFIG")/demo-controller.log" 2>/dev/null || true
  fi
  rm -rf "$WORK"
  log "controller and artifact server stopped; the control plane is still running."
  log "  use it:  export KUBECONFIG=$KUBECONFIG"
  log "  stop it: $SCRIPT_DIR/down.sh${STATE_ARG[0]:+ ${STATE_ARG[0]}}"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- artifact --------------------------------------------------------------------------------------
mkdir -p "$WORK/www"
ARTIFACT="$WORK/www/demo.tar.gz"
# Reproducible archive: same manifests, same digest and revision on every run.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "$SAMPLES/manifests" -cf - . | gzip -n >"$ARTIFACT"
DIGEST="sha256:$(sha256sum "$ARTIFACT" | cut -d' ' -f1)"
COMMIT="$(sha1sum "$ARTIFACT" | cut -d' ' -f1)" # stands in for a git commit id
REVISION="main@sha1:$COMMIT"
SIZE="$(stat -c %s "$ARTIFACT")"

read -r PORT <<<"$(free_ports 1)"
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/www" \
  </dev/null >"$WORK/http.log" 2>&1 &
server_pid=$!
ARTIFACT_URL="http://127.0.0.1:$PORT/demo.tar.gz"
for i in {1..50}; do
  if curl -fsS -o "$WORK/check.tar.gz" "$ARTIFACT_URL" 2>/dev/null; then break; fi
  kill -0 "$server_pid" 2>/dev/null || die "artifact server exited: $(tail -n 5 "$WORK/http.log")"
  ((i < 50)) || die "artifact server not answering on $ARTIFACT_URL after 10s"
  sleep 0.2
done
[[ "sha256:$(sha256sum "$WORK/check.tar.gz" | cut -d' ' -f1)" == "$DIGEST" ]] \
  || die "artifact served on $ARTIFACT_URL does not match $DIGEST"
log "serving $ARTIFACT_URL ($SIZE bytes, $DIGEST)"

# --- fake source: GitRepository with a hand-written status ----------------------------------------
"$KUBECTL" create namespace flux-system --dry-run=client -o yaml | "$KUBECTL" apply --server-side -f - >/dev/null
"$KUBECTL" apply --server-side -f "$SAMPLES/gitrepository.yaml" >/dev/null
NOW="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
GENERATION="$("$KUBECTL" get gitrepository demo -n flux-system -o jsonpath='{.metadata.generation}')"
"$KUBECTL" patch gitrepository demo -n flux-system --subresource=status --type=merge -p "$(
  cat <<EOF
{"status": {
  "observedGeneration": $GENERATION,
  "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                  "message": "stored artifact for revision '$REVISION'",
                  "observedGeneration": $GENERATION, "lastTransitionTime": "$NOW"}],
  "artifact": {"path": "gitrepository/flux-system/demo/$COMMIT.tar.gz", "url": "$ARTIFACT_URL",
               "revision": "$REVISION", "digest": "$DIGEST", "size": $SIZE,
               "lastUpdateTime": "$NOW"}}}
EOF
)" >/dev/null
log "GitRepository flux-system/demo now advertises $REVISION"

# A Kustomization left over from an earlier run would still show that run's Ready condition, and
# its finalizer would wait for a controller: drop it (its objects stay and are re-adopted).
if "$KUBECTL" get kustomization.kustomize.toolkit.fluxcd.io demo -n flux-system >/dev/null 2>&1; then
  log "removing the Kustomization left over from a previous run"
  "$KUBECTL" patch kustomization.kustomize.toolkit.fluxcd.io demo -n flux-system --type=merge \
    -p '{"metadata":{"finalizers":null}}' >/dev/null
  "$KUBECTL" delete kustomization.kustomize.toolkit.fluxcd.io demo -n flux-system --wait=true --timeout=30s >/dev/null
fi

# --- controller ------------------------------------------------------------------------------------
read -r -a extra_args <<<"${KC_DEMO_CONTROLLER_ARGS:-}"
# Free loopback ports instead of Flux's defaults (:8080, :9440), which may well be taken, and only
# the flux-system namespace: the integration tests may share this control plane and run their own
# controllers against their own namespaces.
read -r METRICS_PORT HEALTH_PORT <<<"$(free_ports 2)"
log "starting $CONTROLLER (log: $CONTROLLER_LOG)"
RUNTIME_NAMESPACE=flux-system "$CONTROLLER" --log-encoding=console --watch-all-namespaces=false \
  --metrics-addr="127.0.0.1:$METRICS_PORT" --health-addr="127.0.0.1:$HEALTH_PORT" \
  "${extra_args[@]}" </dev/null >"$CONTROLLER_LOG" 2>&1 &
controller_pid=$!

"$KUBECTL" apply --server-side -f "$SAMPLES/kustomization.yaml" >/dev/null
log "applied Kustomization flux-system/demo; waiting up to ${TIMEOUT}s for it to become Ready"

deadline=$((SECONDS + TIMEOUT))
until "$KUBECTL" wait kustomization.kustomize.toolkit.fluxcd.io/demo -n flux-system \
  --for=condition=Ready --timeout=5s >/dev/null 2>&1; do
  if ! kill -0 "$controller_pid" 2>/dev/null || ((SECONDS >= deadline)); then
    if kill -0 "$controller_pid" 2>/dev/null; then
      log "error: Kustomization flux-system/demo not Ready after ${TIMEOUT}s"
    else
      local_rc=0
      wait "$controller_pid" || local_rc=$?
      controller_pid=""
      log "error: the controller exited (status $local_rc) before the Kustomization became Ready"
    fi
    log "----- Kustomization status -----"
    "$KUBECTL" get kustomization.kustomize.toolkit.fluxcd.io demo -n flux-system -o jsonpath='{.status}' >&2 || true
    echo >&2
    log "----- last 60 lines of the controller log -----"
    if [[ -s "$CONTROLLER_LOG" ]]; then tail -n 60 "$CONTROLLER_LOG" >&2; else log "(the log is empty)"; fi
    log "(full log kept as $(dirname "$KUBECONFIG")/demo-controller.log)"
    exit 1
  fi
  sleep 1
done

log "Kustomization flux-system/demo is Ready"
"$KUBECTL" get kustomizations.kustomize.toolkit.fluxcd.io -n flux-system
echo
"$KUBECTL" get namespace demo
echo
"$KUBECTL" get configmaps,deployments,pods -n demo
