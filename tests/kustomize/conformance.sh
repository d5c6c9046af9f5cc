#!/usr/bin/env bash
# Scores the native kustomize engine on the shared kustomize conformance corpus
# (cases taken from kustomize's own tests). Fails when the runner or the corpus is missing,
# when the runner itself fails (any case failed or could not be evaluated), and when a case
# listed in tests/kustomize/conformance-passing.txt no longer passes.
#
#   tests/kustomize/conformance.sh            # score + regression check
#   tests/kustomize/conformance.sh --update   # rewrite the list of passing cases
#
# Environment: KC_SHARED_DIR, the folder holding bin/kustomize-conformance and
# conformance/kustomize (default: ../shared beside the repository).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
shared="${KC_SHARED_DIR:-$repo/../shared}"
runner="$shared/bin/kustomize-conformance"
corpus="$shared/conformance/kustomize"
passing="$repo/tests/kustomize/conformance-passing.txt"

if [[ ! -x "$runner" || ! -d "$corpus" ]]; then
  echo "conformance: the runner ($runner) or the corpus ($corpus) is missing; set KC_SHARED_DIR to the folder that holds them" >&2
  exit 1
fi

cd "$repo"
cargo build --locked --quiet --bin kustomize-controller
target="${CARGO_TARGET_DIR:-$repo/target}"
binary="$target/debug/kustomize-controller"
results="$target/kustomize-conformance.json"

rm -f "$results"
set +e
"$runner" --corpus "$corpus" --jobs "$(nproc)" --json "$results" -- "$binary" build | tail -n 1
runner_status=${PIPESTATUS[0]}
set -e
if [[ ! -s "$results" ]]; then
  echo "conformance: the runner exited with status $runner_status and wrote no results to $results" >&2
  exit 1
fi

current="$(python3 - "$results" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
cases = data.get("cases", data) if isinstance(data, dict) else data
names = []
for case in cases:
    if isinstance(case, dict) and case.get("status", case.get("result")) in ("pass", "passed", True):
        names.append(case.get("name") or case.get("case"))
print("\n".join(sorted(n for n in names if n)))
PY
)"

if [[ "${1:-}" == "--update" ]]; then
  printf '%s\n' "$current" > "$passing"
  echo "conformance: $(grep -c . "$passing") passing cases recorded in $passing"
  exit 0
fi

if [[ -f "$passing" ]]; then
  regressions="$(comm -23 <(sort "$passing") <(printf '%s\n' "$current" | sort))"
  if [[ -n "$regressions" ]]; then
    echo "conformance: cases that passed before and fail now:" >&2
    printf '  %s\n' $regressions >&2
    exit 1
  fi
fi
# Every case must pass: the runner exits non-zero when a case failed or was skipped.
not_passed="$(python3 - "$results" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
for case in data.get("cases", []):
    if case.get("status") != "passed":
        print("%s (%s)" % (case.get("name"), case.get("status")))
PY
)"
if [[ "$runner_status" -ne 0 || -n "$not_passed" ]]; then
  echo "conformance: the runner exited with status $runner_status; cases that did not pass:" >&2
  printf '  %s\n' "$not_passed" >&2
  exit 1
fi
echo "conformance: no regressions"

# The real-world corpus (kustomization trees of public repositories, see
# tests/kustomize/wild-collect.py), when the shared folder holds one: every tree is built with
# ours and with kustomize v5.8, and any tree that builds differently fails the run.
wild="$shared/conformance/kustomize-wild"
if [[ -d "$wild" ]]; then
  python3 "$repo/tests/kustomize/wild.py" "$wild" --jobs "$(nproc)" \
    --kustomize "$(bash "$repo/tests/kustomize/install-kustomize.sh")" --ours "$binary" 2>/dev/null
else
  echo "kustomize-wild: no corpus at $wild; the real-world comparison did not run"
fi
