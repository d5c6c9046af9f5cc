# shellcheck shell=bash
# Helpers shared by the scripts that build or fetch a test peer into the cache outside the
# repository. Source it; it sets CACHE_ROOT and defines functions only.

CACHE_ROOT="${KC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustomize-controller-tests}"

log() { echo "${0##*/}: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# module_dir MODULE@VERSION: prints the module's source directory in Go's module cache,
# downloading it if needed; fails with go's error.
module_dir() {
  go mod download -json "$1" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))'
}

# hold_lock NAME: serialises the runs of one script on the cache (several test binaries may ask
# for the same peer at once); waits for another holder, saying so.
hold_lock() {
  mkdir -p "$CACHE_ROOT"
  exec 8>"$CACHE_ROOT/.$1.lock"
  if command -v flock >/dev/null && ! flock -n 8; then
    log "another $1 is running; waiting for it"
    flock 8
  fi
}

# copy_module MODULE@VERSION DIR: copies the module's source (downloaded if needed) into DIR,
# writable (Go's module cache is read-only), for a build that edits its go.mod or sources.
copy_module() {
  local src
  src="$(module_dir "$1")" || die "go mod download $1 failed"
  cp -r "$src/." "$2/"
  chmod -R u+w "$2"
}
