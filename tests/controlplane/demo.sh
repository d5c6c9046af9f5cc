#!/usr/bin/env bash
# The README demo: a Kustomization applied by this controller against a local control plane, from a
# Git commit that Flux's own source-controller turns into an artifact.
#
# Usage: tests/controlplane/demo.sh [up] [STATE_DIR]   start, or update, the demo (`make demo`)
#        tests/controlplane/demo.sh down [STATE_DIR]   stop it and the control plane (`make demo-down`)
# (default STATE_DIR: <repo>/.controlplane)
#
# up: build the controller (see KC_DEMO_PROFILE) in the background while up.sh starts the control
# plane (which also runs source-controller and a Git server on loopback);
# commit config/samples/demo/manifests/ to the branch main of the bare
# repository demo.git on the Git server (a new commit only when the manifests changed); apply
# config/samples/demo/gitrepository.yaml pointing at it and ask source-controller to fetch; wait
# until the GitRepository is Ready at that commit; run the controller; apply
# config/samples/demo/kustomization.yaml; wait until it is Ready at the commit, then (bounded)
# until its Deployments have rolled out. The controller keeps running in the background; its pid
# file and log are in STATE_DIR/demo/. Running `up` again is how the demo is updated: it commits
# the edited manifests, reuses the running controller (restarting it only if it exited, its
# binary changed or KC_DEMO_CONTROLLER_ARGS changed), and waits for Ready at the new commit.
#
# down: stops the controller, then the control plane, source-controller and the Git server.
#
# Environment:
#   KC_DEMO_PROFILE          debug or release: the cargo profile to build and run. Default: release
#                            if <target>/release/kustomize-controller exists (an incremental build
#                            then), else debug (a cold debug build takes about half as long)
#   KC_DEMO_CONTROLLER_BIN   use this controller binary instead of building one
#   KC_DEMO_CONTROLLER_ARGS  extra controller arguments (word-split), appended after the demo's own:
#                            --log-encoding=console --watch-all-namespaces=false
#                            --metrics-addr=127.0.0.1:<free> --health-addr=127.0.0.1:<free>
#   KC_DEMO_TIMEOUT          seconds to wait for the GitRepository, then the Kustomization, to be
#                            Ready (default 120 each)
#   KC_DEMO_ROLLOUT_TIMEOUT  seconds to wait for its Deployments to roll out (default 60)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$SCRIPT_DIR/lib.sh"

SAMPLES="$REPO_ROOT/config/samples/demo"
TIMEOUT="${KC_DEMO_TIMEOUT:-120}"
ROLLOUT_TIMEOUT="${KC_DEMO_ROLLOUT_TIMEOUT:-60}"
KUSTOMIZATION_CRD=kustomizations.kustomize.toolkit.fluxcd.io
KS=kustomization.kustomize.toolkit.fluxcd.io
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
START_TIME=$SECONDS

MODE=up
case "${1:-}" in
  up) shift ;;
  down)
    MODE=down
    shift
    ;;
  -h | --help)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
    ;;
esac
(($# <= 1)) || die "usage: demo.sh [up|down] [STATE_DIR]"
STATE_ARG=("$@")
STATE_DIR="${1:-$REPO_ROOT/.controlplane}"

# How to run the demo again and how to stop it, as the user would type it.
if ((${#STATE_ARG[@]} == 0)); then
  AGAIN_CMD="make demo"
  DOWN_CMD="make demo-down"
else
  AGAIN_CMD="tests/controlplane/demo.sh $STATE_DIR"
  DOWN_CMD="tests/controlplane/demo.sh down $STATE_DIR"
fi

# demo_down: stops the controller, then the control plane (and source-controller with it).
demo_down() {
  if [[ -d "$STATE_DIR/demo" ]]; then
    local demo_dir
    demo_dir="$(cd "$STATE_DIR/demo" && pwd)"
    stop_process "$demo_dir" controller 10
  fi
  "$SCRIPT_DIR/down.sh" "${STATE_ARG[@]}"
}

# choose_build: sets PROFILE to the cargo profile to build (empty with KC_DEMO_CONTROLLER_BIN).
choose_build() {
  PROFILE=""
  if [[ -n "${KC_DEMO_CONTROLLER_BIN:-}" ]]; then
    return
  fi
  if [[ -n "${KC_DEMO_PROFILE:-}" ]]; then
    PROFILE="$KC_DEMO_PROFILE"
  elif [[ -x "$TARGET_DIR/release/kustomize-controller" ]]; then
    PROFILE=release
  else
    PROFILE=debug
  fi
  [[ "$PROFILE" == debug || "$PROFILE" == release ]] \
    || die "KC_DEMO_PROFILE must be debug or release, not '$PROFILE'"
}

# check_prerequisites: every tool the demo and up.sh need, checked before anything starts.
check_prerequisites() {
  use_test_go_caches "${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"
  local tools=(curl git sha256sum flock setsid base64 openssl python3)
  [[ -z "$PROFILE" ]] || tools+=(cargo)
  require_tools "the demo" "${tools[@]}"
  [[ -z "$PROFILE" ]] || require_cargo "$REPO_ROOT"
  # go, at the version the Kubernetes build needs, only if a binary still has to be built.
  "$SCRIPT_DIR/install-binaries.sh" --check || exit 1
}

# start_controller_build: sets CONTROLLER to the binary to run and, unless KC_DEMO_CONTROLLER_BIN
# names one, starts building it with cargo in the background (BUILD_PID), so that the build
# overlaps with the control plane's; cargo's output goes to <target>/demo-cargo-build.log.
start_controller_build() {
  BUILD_PID=""
  if [[ -z "$PROFILE" ]]; then
    CONTROLLER="$KC_DEMO_CONTROLLER_BIN"
    [[ -x "$CONTROLLER" ]] || die "KC_DEMO_CONTROLLER_BIN=$CONTROLLER is not an executable file"
    log "using the controller binary $CONTROLLER (KC_DEMO_CONTROLLER_BIN)"
    return
  fi
  local note="" args=()
  BUILD_LOG="$TARGET_DIR/demo-cargo-build.log"
  BUILD_START=$SECONDS
  CONTROLLER="$TARGET_DIR/$PROFILE/kustomize-controller"
  if [[ "$PROFILE" == release ]]; then
    args=(--release)
    [[ -x "$CONTROLLER" ]] || note="first build, ~14 min on 2 cores; "
  else
    [[ -x "$CONTROLLER" ]] || note="first build, ~8 min on 2 cores; "
  fi
  mkdir -p "$TARGET_DIR"
  log "building the controller in the background ($PROFILE; ${note}log: $BUILD_LOG)"
  (cd "$REPO_ROOT" && exec cargo build --bin kustomize-controller "${args[@]}") </dev/null >"$BUILD_LOG" 2>&1 &
  BUILD_PID=$!
}

# finish_controller_build: waits for the build start_controller_build started.
finish_controller_build() {
  [[ -n "$BUILD_PID" ]] || return 0
  local rc=0
  wait "$BUILD_PID" || rc=$?
  BUILD_PID=""
  if ((rc != 0)); then
    log "----- last 30 lines of $BUILD_LOG -----"
    tail -n 30 "$BUILD_LOG" >&2
    die "cargo build of the controller failed after $((SECONDS - BUILD_START)) s (exit status $rc)"
  fi
  log "controller built ($PROFILE) $((SECONDS - BUILD_START)) s after it started"
  [[ -x "$CONTROLLER" ]] || die "cargo build succeeded but $CONTROLLER is missing"
}

# commit_manifests: commits config/samples/demo/manifests/ to main of GIT_ROOT/demo.git (a new
# commit only if they changed) from a work tree in DEMO_DIR/work; sets REVISION to Flux's form of
# the commit (main@sha1:<id>).
commit_manifests() {
  local bare="$GIT_ROOT/demo.git" work="$DEMO_DIR/work" previous commit
  if [[ ! -d "$bare" ]]; then
    git init -q --bare --initial-branch=main "$bare"
  fi
  if [[ ! -d "$work/.git" ]]; then
    rm -rf "$work"
    git init -q --initial-branch=main "$work"
    git -C "$work" remote add origin "$bare"
  fi
  git -C "$work" fetch -q origin 2>/dev/null || true
  if git -C "$work" rev-parse -q --verify origin/main >/dev/null; then
    git -C "$work" reset -q --hard origin/main
  fi
  previous="$(git -C "$work" rev-parse -q --verify HEAD || true)"
  find "$work" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
  cp -R "$SAMPLES/manifests/." "$work/"
  git -C "$work" add -A
  if ! git -C "$work" diff --cached --quiet || [[ -z "$previous" ]]; then
    git -C "$work" -c user.name=demo -c user.email=demo@localhost \
      commit -q --allow-empty -m "demo: config/samples/demo/manifests as of $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    git -C "$work" push -q origin HEAD:main
  fi
  commit="$(git -C "$work" rev-parse HEAD)"
  REVISION="main@sha1:$commit"
  if [[ "$commit" == "$previous" ]]; then
    log "demo.git: manifests unchanged since the last run, still $REVISION"
  elif [[ -n "$previous" ]]; then
    log "demo.git: committed the edited manifests as $REVISION (was main@sha1:$previous)"
  else
    log "demo.git: committed the manifests as $REVISION on $GIT_URL/demo.git"
  fi
}

# fetch_source: applies the GitRepository flux-system/demo pointing at the Git server, asks
# source-controller to fetch now, and waits until its artifact is REVISION.
fetch_source() {
  local token deadline=$((SECONDS + TIMEOUT)) status artifact ready message
  sed "s|^  url: .*|  url: $GIT_URL/demo.git|" "$SAMPLES/gitrepository.yaml" \
    | "$KUBECTL" apply --server-side -f - >/dev/null
  token="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
  "$KUBECTL" annotate gitrepository demo -n flux-system --overwrite \
    "reconcile.fluxcd.io/requestedAt=$token" >/dev/null
  while true; do
    status="$("$KUBECTL" get gitrepository demo -n flux-system -o jsonpath='{.status.artifact.revision}|{.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}' 2>/dev/null)" || status=""
    IFS='|' read -r artifact ready message <<<"$status" || true
    [[ "$artifact" == "$REVISION" && "$ready" == True ]] && break
    if ((SECONDS >= deadline)); then
      log "----- last 20 lines of $FLUX_DIR/source-controller.log -----"
      tail -n 20 "$FLUX_DIR/source-controller.log" >&2 || true
      die "GitRepository flux-system/demo is not Ready at $REVISION after ${TIMEOUT} s (Ready=${ready:-unset}: ${message:-no message}; artifact ${artifact:-none})"
    fi
    sleep 0.5
  done
  log "GitRepository flux-system/demo: source-controller stored the artifact of $REVISION"
}

# binary_stamp FILE: path, size, mtime and inode of FILE (changes whenever cargo relinks it).
binary_stamp() {
  stat -L -c '%n %s %Y %i' "$1"
}

# ensure_controller: reuses the running controller, or (re)starts it, detached, from a copy of
# CONTROLLER in DEMO_DIR (so that its command line names DEMO_DIR, and a rebuild does not touch
# the running binary): when it is not running, when CONTROLLER's content changed, or when
# KC_DEMO_CONTROLLER_ARGS changed.
ensure_controller() {
  local copy="$DEMO_DIR/kustomize-controller" stamp args reason=""
  local metrics_port health_port extra_args=()
  stamp="$(binary_stamp "$CONTROLLER")"
  args="${KC_DEMO_CONTROLLER_ARGS:-}"
  if [[ ! -x "$copy" ]] || { [[ "$stamp" != "$(cat "$DEMO_DIR/controller.stamp" 2>/dev/null)" ]] \
    && [[ "$(sha256sum <"$CONTROLLER")" != "$(sha256sum <"$copy")" ]]; }; then
    reason="binary changed"
    [[ -x "$copy" ]] || reason="first start"
  fi
  if [[ -z "$reason" ]] && ! is_running "$DEMO_DIR" controller; then
    reason="it had exited, see the end of its log"
  fi
  if [[ -z "$reason" && "$args" != "$(cat "$DEMO_DIR/controller.args" 2>/dev/null)" ]]; then
    reason="KC_DEMO_CONTROLLER_ARGS changed"
  fi
  echo "$stamp" >"$DEMO_DIR/controller.stamp"
  if [[ -z "$reason" ]]; then
    log "reusing the running controller (pid $(<"$DEMO_DIR/controller.pid"), same binary)"
    return
  fi

  stop_process "$DEMO_DIR" controller 10
  if [[ "$reason" == "binary changed" || "$reason" == "first start" ]]; then
    cp "$CONTROLLER" "$copy.tmp"
    mv -f "$copy.tmp" "$copy"
  fi
  echo "$args" >"$DEMO_DIR/controller.args"
  read -r -a extra_args <<<"$args"
  # Free loopback ports instead of Flux's defaults (:8080, :9440), which may well be taken, and
  # only the flux-system namespace: the integration tests may share this control plane and run
  # their own controllers against their own namespaces.
  read -r metrics_port health_port <<<"$(free_ports 2)"
  echo "===== $(date -u +%Y-%m-%dT%H:%M:%SZ) demo.sh starts $CONTROLLER ($reason)" >>"$CONTROLLER_LOG"
  RUNTIME_NAMESPACE=flux-system setsid nohup "$copy" \
    --log-encoding=console --watch-all-namespaces=false \
    --metrics-addr="127.0.0.1:$metrics_port" --health-addr="127.0.0.1:$health_port" \
    "${extra_args[@]}" </dev/null >>"$CONTROLLER_LOG" 2>&1 7>&- &
  echo "$!" >"$DEMO_DIR/controller.pid"
  log "started the controller ($reason): pid $!, a copy of $CONTROLLER"
}

# show_failure MESSAGE: prints MESSAGE, the Kustomization's status and the end of the controller
# log, and exits 1 (the controller keeps running).
show_failure() {
  log "error: $1"
  log "----- Kustomization flux-system/demo conditions -----"
  "$KUBECTL" get "$KS" demo -n flux-system >&2 \
    -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' || true
  log "----- last 20 lines of $CONTROLLER_LOG -----"
  tail -n 20 "$CONTROLLER_LOG" >&2 || true
  log "the controller is still running: fix what is wrong and run"
  log "'$AGAIN_CMD' again, or stop everything with '$DOWN_CMD'"
  exit 1
}

# wait_for_revision TOKEN: waits until the Kustomization has handled the reconcile request TOKEN
# and is Ready with REVISION applied; fails fast if that reconcile failed at REVISION.
wait_for_revision() {
  local token="$1" deadline=$((SECONDS + TIMEOUT)) status applied attempted handled ready reason message
  while true; do
    status="$("$KUBECTL" get "$KS" demo -n flux-system -o jsonpath='{.status.lastAppliedRevision}|{.status.lastAttemptedRevision}|{.status.lastHandledReconcileAt}|{.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Ready")].message}' 2>/dev/null)" || status=""
    # Not tab-separated: read would merge the empty fields.
    IFS='|' read -r applied attempted handled ready reason message <<<"$status" || true
    if [[ "$handled" == "$token" && "$ready" == True && "$applied" == "$REVISION" ]]; then
      return 0
    fi
    if [[ "$handled" == "$token" && "$ready" == False && "$attempted" == "$REVISION" ]]; then
      show_failure "the Kustomization failed at $REVISION ($reason): $message"
    fi
    is_running "$DEMO_DIR" controller \
      || show_failure "the controller exited before the Kustomization became Ready at $REVISION"
    ((SECONDS < deadline)) \
      || show_failure "the Kustomization is not Ready at $REVISION after ${TIMEOUT} s (Ready=${ready:-unset}: ${message:-no message})"
    sleep 1
  done
}

# plural N WORD: WORD, with an s unless N is 1.
plural() {
  if (($1 == 1)); then echo "$2"; else echo "$2s"; fi
}

# wait_for_rollouts: waits, at most ROLLOUT_TIMEOUT seconds in all, for the Deployments in the
# Kustomization's inventory to roll out, and says in one line whether they did.
wait_for_rollouts() {
  local deployments=() pending=() ready=() d remaining start=$SECONDS
  mapfile -t deployments < <("$KUBECTL" get "$KS" demo -n flux-system \
    -o jsonpath='{range .status.inventory.entries[*]}{.id}{"\n"}{end}' \
    | awk -F_ '$3 == "apps" && $4 == "Deployment" { print $1 "/" $2 }')
  ((${#deployments[@]} > 0)) || return 0
  for d in "${deployments[@]}"; do
    remaining=$((start + ROLLOUT_TIMEOUT - SECONDS))
    ((remaining > 0)) || remaining=1
    if "$KUBECTL" rollout status "deployment/${d#*/}" -n "${d%%/*}" --timeout="${remaining}s" >/dev/null 2>&1; then
      ready+=("$d")
    else
      pending+=("$d")
    fi
  done
  if ((${#pending[@]} == 0)); then
    log "$(plural "${#ready[@]}" Deployment) ${ready[*]} rolled out in $((SECONDS - start)) s: kwok simulates the nodes and kubelets, so pods turn Ready without running any container"
  else
    log "$(plural "${#pending[@]}" Deployment) ${pending[*]} not rolled out after ${ROLLOUT_TIMEOUT} s; that does not matter for the demo: the controller applied $( ((${#pending[@]} == 1)) && echo it || echo them), and pods here only run on kwok's simulated nodes, never as containers (see $STATE_DIR/kwok.log and kube-scheduler.log)"
  fi
}

if [[ "$MODE" == down ]]; then
  demo_down
  exit 0
fi

# --- prerequisites and control plane ---------------------------------------------------------------
choose_build
check_prerequisites
start_controller_build
# A failed start must not leave the background build running.
trap '[[ -z "${BUILD_PID:-}" ]] || kill "$BUILD_PID" 2>/dev/null || true' EXIT
KUBECONFIG="$("$SCRIPT_DIR/up.sh" "${STATE_ARG[@]}")" || die "up.sh failed"
export KUBECONFIG
STATE_DIR="$(dirname "$KUBECONFIG")"
KUBECTL="$STATE_DIR/bin/kubectl"
[[ -x "$KUBECTL" ]] || die "$KUBECTL not found (up.sh should have linked it)"
DEMO_DIR="$STATE_DIR/demo"
CONTROLLER_LOG="$DEMO_DIR/controller.log"
FLUX_DIR="$STATE_DIR/flux"
[[ -s "$FLUX_DIR/git-url" && -s "$FLUX_DIR/git-root" ]] \
  || die "up.sh started no Git server in $FLUX_DIR (is KC_NO_SOURCE_CONTROLLER set?)"
GIT_URL="$(<"$FLUX_DIR/git-url")"
GIT_ROOT="$(<"$FLUX_DIR/git-root")"
mkdir -p "$DEMO_DIR"
# One demo run at a time per state dir (fd 7 is closed for the processes left running).
exec 7>"$DEMO_DIR/lock"
flock -w 600 7 || die "another demo.sh has held $DEMO_DIR/lock for 10 minutes"

"$KUBECTL" get crd "$KUSTOMIZATION_CRD" >/dev/null 2>&1 \
  || die "the $KUSTOMIZATION_CRD CRD is not installed: generate it into $REPO_ROOT/crds/ and rerun"

# --- controller binary, Git commit, source, controller, Kustomization -------------------------------
finish_controller_build
commit_manifests
fetch_source
ensure_controller

"$KUBECTL" apply --server-side -f "$SAMPLES/kustomization.yaml" >/dev/null
# A reconcile request makes the wait below see a reconcile of this run, even when the revision
# did not change or the controller was just restarted.
TOKEN="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
"$KUBECTL" annotate "$KS" demo -n flux-system --overwrite "reconcile.fluxcd.io/requestedAt=$TOKEN" >/dev/null
log "applied Kustomization flux-system/demo; waiting up to ${TIMEOUT} s for it to be Ready at $REVISION"
wait_for_revision "$TOKEN"
log "Kustomization flux-system/demo is Ready at $REVISION ($((SECONDS - START_TIME)) s after the start of demo.sh)"
wait_for_rollouts

echo
"$KUBECTL" get kustomizations.kustomize.toolkit.fluxcd.io -n flux-system
if "$KUBECTL" get namespace demo >/dev/null 2>&1; then
  echo
  "$KUBECTL" get configmaps,deployments,pods -n demo
fi
echo
log "the controller, source-controller and the Git server keep running in the background. Next steps:"
log "  follow the controller:  tail -f $CONTROLLER_LOG"
log "  use the cluster:        export KUBECONFIG=$KUBECONFIG PATH=$STATE_DIR/bin:\$PATH"
log "  try a change:           edit config/samples/demo/manifests and run '$AGAIN_CMD' again"
log "  stop everything:        $DOWN_CMD"
