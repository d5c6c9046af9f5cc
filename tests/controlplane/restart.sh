#!/usr/bin/env bash
# Restarts one process of a control plane that up.sh started, with the command line it runs
# with (the fault tests restart kube-apiserver as an upgrade would). For kube-apiserver, waits
# until /readyz answers again.
#
# Usage: tests/controlplane/restart.sh STATE_DIR NAME
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$SCRIPT_DIR/lib.sh"

STATE_DIR="$(cd "${1:?usage: restart.sh STATE_DIR NAME}" && pwd)"
NAME="${2:?usage: restart.sh STATE_DIR NAME}"
READY_TIMEOUT="${KC_READY_TIMEOUT:-120}"

is_running "$STATE_DIR" "$NAME" || die "$NAME is not running in $STATE_DIR"
pid="$(<"$STATE_DIR/$NAME.pid")"
mapfile -d '' -t argv <"/proc/$pid/cmdline"
((${#argv[@]} > 0)) || die "cannot read the command line of $NAME (pid $pid)"
stop_process "$STATE_DIR" "$NAME" 3
setsid nohup "${argv[@]}" </dev/null >>"$STATE_DIR/$NAME.log" 2>&1 &
echo "$!" >"$STATE_DIR/$NAME.pid"
log "restarted $NAME (pid $!)"

if [[ "$NAME" == kube-apiserver ]]; then
  deadline=$((SECONDS + READY_TIMEOUT))
  until "$STATE_DIR/bin/kubectl" --kubeconfig "$STATE_DIR/kubeconfig" get --raw=/readyz \
    --request-timeout=5s >/dev/null 2>&1; do
    is_running "$STATE_DIR" "$NAME" || die "kube-apiserver exited after its restart"
    ((SECONDS < deadline)) || die "kube-apiserver not ready ${READY_TIMEOUT}s after its restart"
    sleep 0.5
  done
  log "kube-apiserver ready again"
fi
