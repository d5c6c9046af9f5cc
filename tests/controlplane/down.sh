#!/usr/bin/env bash
# Stops the control plane started by up.sh, and any process recorded in a subdirectory of its
# state directory (the demo's controller and artifact server), and deletes the state directory.
#
# Usage: tests/controlplane/down.sh [STATE_DIR]      (default STATE_DIR: <repo>/.controlplane)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$SCRIPT_DIR/lib.sh"

STATE_DIR="${1:-$REPO_ROOT/.controlplane}"
if [[ ! -d "$STATE_DIR" ]]; then
  log "$STATE_DIR does not exist; nothing to stop"
  exit 0
fi
STATE_DIR="$(cd "$STATE_DIR" && pwd)"

# Only ever delete a directory up.sh created (it may hold nothing but the lock after a failed start).
if [[ ! -e "$STATE_DIR/$CP_MARKER" ]] \
  && [[ -n "$(find "$STATE_DIR" -mindepth 1 -maxdepth 1 ! -name lock -print -quit)" ]]; then
  die "$STATE_DIR does not look like an up.sh state directory (no $CP_MARKER); refusing to delete it"
fi

# Wait for a concurrent up.sh to finish rather than pulling the rug from under it.
exec 9>>"$STATE_DIR/lock"
flock -w 120 9 || die "timed out after 120s waiting for $STATE_DIR/lock"

# First whatever runs against the cluster: the demo's controller and artifact server.
stop_recorded_processes "$STATE_DIR"
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd eks-authenticator; do
  stop_process "$STATE_DIR" "$name" 10
done
rm -rf "$STATE_DIR"
log "control plane in $STATE_DIR stopped and removed"
