#!/usr/bin/env bash
# `make test`: every test (unit, integration, end-to-end, the kustomize conformance corpus),
# against a fresh local control plane (etcd + kube-apiserver on loopback) that it starts and
# stops again.
#
# What the tests compare with (Kubernetes, kwok, kustomize, sops, moto, Vault, the flux CLI,
# helm, Flux's own controller and CRD, kustomize's krusty tests) is built or fetched from the
# package registries on the first run, into caches outside the repository keyed by version. That
# happens in two lanes beside the Rust build of the tests, one progress line per step; each
# step's output goes to target/test-logs/<step>.log.
#
# Usage: tests/run.sh [CARGO TEST ARGUMENTS]
#   With arguments (for example `--test e2e -- requested_at`), only those tests run, and the
#   smoke run against the oldest Kubernetes is skipped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$repo/tests/controlplane/lib.sh"
target="${CARGO_TARGET_DIR:-$repo/target}"
logs="$target/test-logs"
state="$target/test-controlplane"
remote="$target/test-controlplane-remote"
oldest="$target/test-controlplane-oldest"
cache="${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"
# Written when every peer has been had once: the next run is a warm one.
warm_stamp="$cache/.make-test-warm"
# The oldest Kubernetes minor Flux 2.9 supports (>= 1.34.1), and the newest patch of it the Go
# module proxy serves.
OLDEST_K8S=v1.34.4
# The end-to-end tests run against it too: apply, prune, drift, a refused object, a requested
# reconcile, health checks, dependencies, diff.
SMOKE_TESTS=(
  applies_reports_ready_and_prunes_what_left_the_source
  drift_from_kubectl_edit_is_reverted_on_the_next_reconcile
  a_refused_object_fails_the_whole_apply_and_nothing_is_applied
  requested_at_annotation_triggers_a_reconcile
  wait_becomes_ready_only_after_every_workload_and_custom_resource_is_ready
  a_chain_created_at_once_is_applied_in_order_woken_by_its_dependencies
  diff_shows_what_applying_would_change
)
# Free disk the first run needs (Go's module and build caches take most of it, about 21 GiB
# until every peer is built) and a warm one.
COLD_DISK_GIB=30
WARM_DISK_GIB=3
# The oldest Go that builds every peer (the kustomize api module's go line).
GO_MIN_VERSION=1.26.0
START=$SECONDS

say() { echo "make test: $*" >&2; }

# free_gib DIR: the GiB free on the filesystem holding DIR (or its nearest existing parent).
free_gib() {
  local dir="$1"
  while [[ ! -e "$dir" ]]; do dir="$(dirname "$dir")"; done
  df -Pk "$dir" | awk 'NR == 2 { print int($4 / 1048576) }'
}

# check_prerequisites: one sentence naming what is missing, before anything is built.
check_prerequisites() {
  use_test_go_caches "$cache"
  require_tools "make test" cargo go python3 git openssl flock setsid base64 curl tar
  require_cargo "$repo"
  local have
  have="$(cd / && go env GOVERSION 2>/dev/null)" || have=""
  have="${have#go}"
  have="${have%%[!0-9.]*}"
  version_at_least "$have" "$GO_MIN_VERSION" \
    || die "make test needs go $GO_MIN_VERSION or newer to build its peers, but go on PATH is ${have:-of unknown version}: install a newer Go (https://go.dev/dl/) and rerun"
  python3 -c 'import venv, ensurepip' 2>/dev/null \
    || die "make test needs python3's venv and ensurepip modules (for moto), not found: install them (Debian: apt-get install python3-venv) and rerun"
  local need=$WARM_DISK_GIB dir free
  [[ -f "$warm_stamp" ]] || need=$COLD_DISK_GIB
  for dir in "$target" "$cache" "$GOMODCACHE" "$GOCACHE"; do
    free="$(free_gib "$dir")"
    ((free >= need)) || die "make test needs about $need GiB free for $([[ $need == "$COLD_DISK_GIB" ]] && echo "its first run (Go's caches, the peers, target/)" || echo "a run"), but the filesystem holding $dir has $free GiB free: free some space (or point KC_TEST_CACHE, GOMODCACHE, GOCACHE, CARGO_TARGET_DIR elsewhere) and rerun"
  done
}

# Peers, in two lanes that run beside the Rust build, each in its order: NAME|ENV VAR (set to
# the last stdout line; - for none)|COMMAND. The lanes are balanced by their first-run times.
LANE_A=(
  "kubernetes|-|bash tests/controlplane/install-binaries.sh"
  "kustomize|KC_DIFF_KUSTOMIZE|bash tests/kustomize/install-kustomize.sh"
  "conformance-corpus|KC_CONFORMANCE_CORPUS|bash tests/kustomize/extract-conformance.sh"
  "flux-crd|FLUX_KUSTOMIZATION_CRD|bash tests/flux/fetch-flux-crd.sh"
  "sops|KC_SOPS_BIN|bash tests/sops/install-tools.sh"
  "flux-cli|KC_FLUX_CLI|bash tests/flux/install-flux-cli.sh"
)
# helm and Flux's controllers reuse most of the Kubernetes build's compiled packages (Go's build
# cache), so they come after Vault, whose dependencies are mostly its own.
LANE_B=(
  "moto|KC_MOTO_SERVER|bash tests/keyservices/install-moto.sh"
  "vault|KC_VAULT_BIN|bash tests/keyservices/install-vault.sh"
  "helm|KC_HELM|bash tests/helm/install-helm.sh"
  "flux-controller|KC_FLUX_KC_BIN|bash tests/bench/install-flux-controller.sh"
  "source-controller|-|bash tests/flux/install-source-controller.sh"
  "crane|-|bash tests/flux/install-crane.sh"
)
if (($# == 0)); then
  LANE_A+=("kubernetes-$OLDEST_K8S|-|env K8S_VERSION=$OLDEST_K8S bash tests/controlplane/install-binaries.sh")
fi
STEPS=$((${#LANE_A[@]} + ${#LANE_B[@]} + 1))
step_number=0

# lane ENV_FILE PEER...: has each peer in turn (unless its variable is already set), one
# progress line each, and appends `export VAR=value` lines to ENV_FILE. Stops at the first
# failure, printing the end of that step's log.
lane() {
  local env_file="$1" entry name var command start value rc
  shift
  for entry in "$@"; do
    IFS='|' read -r name var command <<<"$entry"
    if [[ "$var" != - && -n "${!var:-}" ]]; then
      say "$name: ${!var} (from $var)"
      continue
    fi
    start=$SECONDS rc=0
    value="$(cd "$repo" && $command </dev/null 2>"$logs/$name.log" | tail -n 1)" || rc=$?
    if ((rc != 0)) || [[ -z "$value" ]]; then
      say "$name: failed after $((SECONDS - start)) s; the end of $logs/$name.log:"
      tail -n 30 "$logs/$name.log" >&2
      return 1
    fi
    [[ "$var" == - ]] || printf 'export %s=%q\n' "$var" "$value" >>"$env_file"
    say "$name: ready in $((SECONDS - start)) s"
  done
}

# rust_build CARGO_ARGS...: builds every test binary the run will execute.
rust_build() {
  local start=$SECONDS rc=0
  (cd "$repo" && cargo test --locked --no-run "$@") \
    </dev/null >"$logs/rust-build.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    say "rust build of the tests: failed after $((SECONDS - start)) s; the end of $logs/rust-build.log:"
    tail -n 40 "$logs/rust-build.log" >&2
    return 1
  fi
  say "rust build of the tests: ready in $((SECONDS - start)) s"
}

down() {
  bash "$repo/tests/controlplane/down.sh" "$state" >/dev/null 2>&1 || true
  bash "$repo/tests/controlplane/down.sh" "$remote" >/dev/null 2>&1 || true
  bash "$repo/tests/controlplane/down.sh" "$oldest" >/dev/null 2>&1 || true
}

check_prerequisites
mkdir -p "$logs" "$cache"
down
trap 'down; kill $(jobs -p) 2>/dev/null || true' EXIT

# What cargo test runs: every target of the workspace, or what the arguments select (their
# part before `--` is what the build of the tests needs).
if (($# == 0)); then
  selection=(--workspace --all-targets)
  cargo_args=("${selection[@]}")
else
  selection=("$@")
  cargo_args=()
  for arg in "$@"; do
    [[ "$arg" == -- ]] && break
    cargo_args+=("$arg")
  done
fi
if [[ -f "$warm_stamp" ]]; then
  say "$STEPS steps: the tests' build and their peers (cached); logs in $logs"
else
  say "$STEPS steps: the tests' build and their peers, built once into $cache (first run: about 30 min on 2 cores); logs in $logs"
fi
peers_env="$logs/peers.env"
: >"$peers_env.a"; : >"$peers_env.b"
rust_build "${cargo_args[@]}" &
rust_pid=$!
lane "$peers_env.a" "${LANE_A[@]}" &
lane_a_pid=$!
lane "$peers_env.b" "${LANE_B[@]}" &
lane_b_pid=$!
failed=0
for pid in $rust_pid $lane_a_pid $lane_b_pid; do
  wait "$pid" || failed=1
done
((failed == 0)) || die "a step failed (see above); nothing was tested"
cat "$peers_env.a" "$peers_env.b" >"$peers_env" 2>/dev/null || true
# shellcheck disable=SC1090
source "$peers_env"
if (($# == 0)); then
  touch "$warm_stamp"
  # Every peer is built: Go's caches for their builds are not needed any more.
  for dir in "${TEST_GO_CACHES[@]}"; do
    chmod -R u+w "$dir" 2>/dev/null || true
    rm -rf "$dir"
  done
fi
say "ready to test after $((SECONDS - START)) s"

KC_TEST_KUBECONFIG="$(bash "$repo/tests/controlplane/up.sh" "$state")"
export KC_TEST_KUBECONFIG
# A second, bare API server: the remote cluster of the spec.kubeConfig tests.
KC_TEST_REMOTE_KUBECONFIG="$(KC_APISERVER_ONLY=1 bash "$repo/tests/controlplane/up.sh" "$remote")"
export KC_TEST_REMOTE_KUBECONFIG

cd "$repo"
status=0
test_start=$SECONDS
cargo test --locked --no-fail-fast "${selection[@]}" || status=$?
# `--all-targets` leaves doc tests out: the crates' README examples are doc tests.
if (($# == 0)); then
  cargo test --locked --workspace --doc || status=$?
fi

# The end-to-end smoke subset again, against the oldest Kubernetes minor Flux 2.9 supports.
# Skipped when arguments select tests: it belongs to the full run.
if (($# == 0)); then
  down
  KC_TEST_KUBECONFIG="$(K8S_VERSION="$OLDEST_K8S" bash "$repo/tests/controlplane/up.sh" "$oldest")"
  export KC_TEST_KUBECONFIG
  say "the e2e smoke subset against Kubernetes $OLDEST_K8S"
  cargo test --locked --test e2e -- "${SMOKE_TESTS[@]}" || status=$?
fi

du_gib() { du -sk "$@" 2>/dev/null | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }'; }
say "$([[ $status == 0 ]] && echo passed || echo FAILED) in $((SECONDS - START)) s ($((test_start - START)) s to build and fetch, $((SECONDS - test_start)) s of tests); disk: target/ $(du_gib "$target") GiB, peers $(du_gib "$cache") GiB"
exit "$status"
