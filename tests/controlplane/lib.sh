# shellcheck shell=bash
# Helpers shared by up.sh, down.sh, restart.sh and demo.sh. Source it; it defines functions only.

# Defaults shared with install-binaries.sh (exported so that script builds the same versions).
export K8S_VERSION="${K8S_VERSION:-v1.35.4}"
export SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.9.6}"
export KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"

# Marker file up.sh puts in every state dir; down.sh refuses to delete a directory without it.
# shellcheck disable=SC2034 # used by the scripts that source this file
CP_MARKER=".kustomize-controller-test-controlplane"

# log, die (and CACHE_ROOT, the test cache).
# shellcheck source=tests/peer-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../peer-lib.sh"

# is_running STATE_DIR NAME: true if STATE_DIR/NAME.pid names a live process whose command line
# mentions STATE_DIR (guards against a recycled pid after a reboot).
is_running() {
  local pidfile="$1/$2.pid" pid cmdline
  [[ -s "$pidfile" ]] || return 1
  pid="$(<"$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"$1"* ]]
}

# stop_process STATE_DIR NAME [GRACE_SECONDS]: SIGTERM, then SIGKILL after the grace period.
stop_process() {
  local dir="$1" name="$2" grace="${3:-10}" pid i
  if is_running "$dir" "$name"; then
    pid="$(<"$dir/$name.pid")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 5; i++)); do
      is_running "$dir" "$name" || break
      sleep 0.2
    done
    if is_running "$dir" "$name"; then
      log "$name did not exit after ${grace}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 25; i++)); do
        is_running "$dir" "$name" || break
        sleep 0.2
      done
    fi
  fi
  rm -f "$dir/$name.pid"
}

# free_ports N: prints N distinct free TCP ports on 127.0.0.1, space separated.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# require_tools PURPOSE TOOL...: dies with one sentence naming every TOOL that is not on PATH.
require_tools() {
  local purpose="$1" tool missing=() list
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) && return 0
  printf -v list '%s, ' "${missing[@]}"
  die "$purpose needs ${list%, }, not found on PATH: install what is missing and rerun"
}

# version_at_least HAVE WANT: true if dotted version HAVE (e.g. 1.95.0) is WANT (e.g. 1.89) or newer.
version_at_least() {
  [[ -n "$1" ]] || return 1
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]
}

# require_cargo REPO_ROOT: dies unless cargo is at least the rust-version of REPO_ROOT/Cargo.toml.
require_cargo() {
  local want have
  want="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$1/Cargo.toml")"
  want="${want%%$'\n'*}"
  [[ -n "$want" ]] || return 0
  have="$(cargo --version 2>/dev/null || true)" # "cargo 1.95.0 (f2d3ce0bd 2026-03-21)"
  have="${have#cargo }"
  have="${have%%[!0-9.]*}"
  version_at_least "$have" "$want" \
    || die "building the controller needs cargo $want or newer (rust-version in Cargo.toml), but cargo on PATH is ${have:-of unknown version}: update Rust (rustup update) and rerun"
}

# use_test_go_caches CACHE_ROOT: Go's module and build caches for the test peers' builds go under
# CACHE_ROOT (go-mod, go-build) unless GOMODCACHE or GOCACHE is set in the environment, so that
# the builds share them and `make test` can remove them once every peer is built (the binaries
# are what it keeps). Sets TEST_GO_CACHES to the private caches in use.
use_test_go_caches() {
  TEST_GO_CACHES=()
  if [[ -z "${GOMODCACHE:-}" ]]; then
    export GOMODCACHE="$1/go-mod"
    TEST_GO_CACHES+=("$GOMODCACHE")
  fi
  if [[ -z "${GOCACHE:-}" ]]; then
    export GOCACHE="$1/go-build"
    TEST_GO_CACHES+=("$GOCACHE")
  fi
}

# stop_recorded_processes STATE_DIR: stops every process recorded by a pid file one directory
# below STATE_DIR (the demo's controller and artifact server in STATE_DIR/demo), so that
# wiping STATE_DIR never leaves one of them running.
stop_recorded_processes() {
  local pidfile
  while IFS= read -r -d '' pidfile; do
    stop_process "$(dirname "$pidfile")" "$(basename "$pidfile" .pid)" 5
  done < <(find "$1" -mindepth 2 -maxdepth 2 -name '*.pid' -print0 2>/dev/null)
}
