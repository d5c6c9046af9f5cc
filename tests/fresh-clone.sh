#!/usr/bin/env bash
# Runs `make test` as a newcomer would: the committed HEAD cloned into an empty temporary
# directory (nothing beside it), then `make test` there, timed. With --cold, every cache starts
# empty too (the peers' cache with Go's module and build caches in it, and cargo's target
# directory, all inside the temporary directory), so the log shows what a first run costs on
# this machine; only crates.io's downloads (~/.cargo/registry) are shared. With --demo,
# `make demo` (then `make demo-down`) runs first, as the README's two commands go.
#
# Usage: tests/fresh-clone.sh [--cold] [--demo] [--keep]
#   --keep   leave the temporary directory (and its caches) for a second, warm run:
#            KC_FRESH_CLONE_DIR=<that directory> tests/fresh-clone.sh reuses it.
# The last lines say how long each command took.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cold=0 demo=0 keep=0
for arg in "$@"; do
  case "$arg" in
  --cold) cold=1 ;;
  --demo) demo=1 ;;
  --keep) keep=1 ;;
  *) echo "fresh-clone.sh: unknown argument '$arg' (usage: tests/fresh-clone.sh [--cold] [--demo] [--keep])" >&2; exit 2 ;;
  esac
done

work="${KC_FRESH_CLONE_DIR:-}"
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  git clone --quiet "$repo" "$work/kustomize-controller"
  echo "fresh-clone.sh: cloned $(git -C "$repo" rev-parse --short HEAD) into $work/kustomize-controller" >&2
  ((keep == 1)) || trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fi
[[ -z "$(ls -A "$work" | grep -v -e '^kustomize-controller$' -e '^caches$')" ]] \
  || { echo "fresh-clone.sh: $work holds more than the clone and its caches" >&2; exit 1; }

if ((cold == 1)) || [[ -d "$work/caches" ]]; then
  mkdir -p "$work/caches"
  export KC_TEST_CACHE="$work/caches/peers" CARGO_TARGET_DIR="$work/caches/target"
fi
what="$([[ -n "${KC_TEST_CACHE:-}" ]] && echo "caches in $work/caches" || echo "the machine's caches")"

cd "$work/kustomize-controller"
status=0
if ((demo == 1)); then
  start=$SECONDS
  make demo || status=$?
  echo "fresh-clone.sh: make demo $([[ $status == 0 ]] && echo passed || echo failed) in $((SECONDS - start)) s ($what)" >&2
  make demo-down >/dev/null 2>&1 || true
  ((status == 0)) || exit "$status"
fi
start=$SECONDS
make test || status=$?
echo "fresh-clone.sh: make test $([[ $status == 0 ]] && echo passed || echo failed) in $((SECONDS - start)) s in a fresh clone ($what); $(nproc) CPUs; $(date -u +%Y-%m-%d)" >&2
exit "$status"
