#!/usr/bin/env bash
# Runs every test against a fresh local control plane (etcd + kube-apiserver on loopback),
# which it builds on first use, starts, and stops when the tests are done.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
state="$repo/target/test-controlplane"

remote="$repo/target/test-controlplane-remote"
oldest="$repo/target/test-controlplane-oldest"
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

down() {
  bash "$repo/tests/controlplane/down.sh" "$state" >/dev/null 2>&1 || true
  bash "$repo/tests/controlplane/down.sh" "$remote" >/dev/null 2>&1 || true
  bash "$repo/tests/controlplane/down.sh" "$oldest" >/dev/null 2>&1 || true
}
down
trap down EXIT
KC_TEST_KUBECONFIG="$(bash "$repo/tests/controlplane/up.sh" "$state")"
export KC_TEST_KUBECONFIG
# A second, bare API server: the remote cluster of the spec.kubeConfig tests.
KC_TEST_REMOTE_KUBECONFIG="$(KC_APISERVER_ONLY=1 bash "$repo/tests/controlplane/up.sh" "$remote")"
export KC_TEST_REMOTE_KUBECONFIG
# The reference kustomize that tests/kustomize_differential.rs compares our builds with (also
# built on first use, from the Go module proxy).
if [[ -z "${KC_DIFF_KUSTOMIZE:-}" ]]; then
  KC_DIFF_KUSTOMIZE="$(bash "$repo/tests/kustomize/install-kustomize.sh")"
fi
export KC_DIFF_KUSTOMIZE
# The reference sops that tests/sops_roundtrip.rs compares our decryption with.
if [[ -z "${KC_SOPS_BIN:-}" ]]; then
  KC_SOPS_BIN="$(bash "$repo/tests/sops/install-tools.sh")"
fi
export KC_SOPS_BIN
# The key services SOPS files are encrypted against in tests/sops_keyservices.rs and
# tests/e2e/keyservices.rs: moto's AWS KMS and STS (PyPI) and a Vault dev server (built from the
# Go module proxy).
if [[ -z "${KC_MOTO_SERVER:-}" ]]; then
  KC_MOTO_SERVER="$(bash "$repo/tests/keyservices/install-moto.sh")"
fi
export KC_MOTO_SERVER
if [[ -z "${KC_VAULT_BIN:-}" ]]; then
  KC_VAULT_BIN="$(bash "$repo/tests/keyservices/install-vault.sh")"
fi
export KC_VAULT_BIN
# The flux CLI that tests/e2e/flux_cli.rs drives this controller with (get, tree, events,
# suspend/resume, reconcile, diff).
if [[ -z "${KC_FLUX_CLI:-}" ]]; then
  KC_FLUX_CLI="$(bash "$repo/tests/flux/install-flux-cli.sh")"
fi
export KC_FLUX_CLI
# The helm that tests/install.rs installs and renders charts/kustomize-controller with.
if [[ -z "${KC_HELM:-}" ]]; then
  KC_HELM="$(bash "$repo/tests/helm/install-helm.sh")"
fi
export KC_HELM
# Flux's own kustomize-controller (v1.9.5), which tests/e2e/flux_parity.rs runs beside ours to
# compare the status and events both write for the same Kustomization.
if [[ -z "${KC_FLUX_KC_BIN:-}" ]]; then
  KC_FLUX_KC_BIN="$(bash "$repo/tests/bench/install-flux-controller.sh")"
fi
export KC_FLUX_KC_BIN

cd "$repo"
status=0
cargo test --locked --workspace --all-targets --no-fail-fast "$@" || status=$?
# `--all-targets` leaves doc tests out: the crates' README examples are doc tests.
cargo test --locked --workspace --doc "$@" || status=$?

# The end-to-end smoke subset again, against the oldest Kubernetes minor Flux 2.9 supports
# (its kube-apiserver, controller-manager and scheduler built once like the others, cached).
# Skipped when arguments select tests: it belongs to the full run.
if (($# == 0)); then
  down
  KC_TEST_KUBECONFIG="$(K8S_VERSION="$OLDEST_K8S" bash "$repo/tests/controlplane/up.sh" "$oldest")"
  export KC_TEST_KUBECONFIG
  echo "run.sh: e2e smoke subset against Kubernetes $OLDEST_K8S" >&2
  cargo test --locked --test e2e -- "${SMOKE_TESTS[@]}" || status=$?
fi
exit "$status"
