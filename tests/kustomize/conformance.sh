#!/usr/bin/env bash
# Scores the native kustomize engine on the shared kustomize conformance corpus
# (cases taken from kustomize's own tests) and fails if a case listed in
# tests/kustomize/conformance-passing.txt no longer passes.
#
#   tests/kustomize/conformance.sh            # score + regression check
#   tests/kustomize/conformance.sh --update   # rewrite the list of passing cases
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
shared="${KC_SHARED_DIR:-$repo/../shared}"
runner="$shared/bin/kustomize-conformance"
passing="$repo/tests/kustomize/conformance-passing.txt"

if [[ ! -x "$runner" ]]; then
  echo "conformance: $runner not found; skipping (the corpus lives beside the repository)" >&2
  exit 0
fi

cd "$repo"
cargo build --locked --quiet --bin kustomize-controller
binary="$repo/target/debug/kustomize-controller"
results="$repo/target/kustomize-conformance.json"

set +e
"$runner" --jobs "$(nproc)" --json "$results" -- "$binary" build | tail -n 1
set -e

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
echo "conformance: no regressions"
