#!/usr/bin/env bash
# Extracts the kustomize conformance corpus from kustomize's own tests: the krusty tests of the
# sigs.k8s.io/kustomize/api module (its module zip ships the _test.go files) are run with a
# recorder (tests/kustomize/conformance/record.go) that saves every build they make as a case:
# the in-memory file tree, the directory built, the load restrictor, and what kustomize itself
# produced (the YAML, or the fact that it failed). tests/kustomize_conformance.rs runs this
# project's `build` on every case.
#
# The corpus lands in a cache outside the repository, keyed by the api version and by the
# recorder's and this script's contents, so only the first run pays (about a minute).
#
# Usage: tests/kustomize/extract-conformance.sh
# stdout: the corpus directory (only that). Everything else goes to stderr; go's own output goes
#         to <cache root>/kustomize-conformance.log.
# Environment: KUSTOMIZE_API_VERSION (default v0.21.2: the api module kustomize v5.8.2, the
#              reference binary of tests/kustomize/install-kustomize.sh, is built with),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
set -euo pipefail

VERSION="${KUSTOMIZE_API_VERSION:-v0.21.2}"
MODULE="sigs.k8s.io/kustomize/api"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/peer-lib.sh
source "$here/../peer-lib.sh"
key="$(cat "$here/conformance/record.go" "$0" | sha256sum | cut -c1-12)"
OUT_DIR="$CACHE_ROOT/kustomize-conformance-$VERSION-$key"
LOG="$CACHE_ROOT/kustomize-conformance.log"

# True if the cached corpus is complete (the last step writes its README).
corpus_ok() {
  [[ -f "$OUT_DIR/README.md" ]]
}

extract() {
  command -v go >/dev/null || die "go is required to extract the kustomize conformance corpus"
  local work
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  log "extracting the conformance corpus from $MODULE $VERSION's krusty tests (first run only)"
  copy_module "$MODULE@$VERSION" "$work"
  # Kustomizer.Run becomes runUnrecorded; record.go's Run wraps it. The harness names the
  # running (sub)test around each of its builds.
  sed -i 's/^func (b \*Kustomizer) Run(/func (b *Kustomizer) runUnrecorded(/' "$work/krusty/kustomizer.go"
  grep -q 'runUnrecorded' "$work/krusty/kustomizer.go" || die "$MODULE $VERSION has no Kustomizer.Run to wrap"
  cp "$here/conformance/record.go" "$work/krusty/zz_conformance_record.go"
  python3 - "$work/testutils/kusttest/harness.go" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
count = 0
for method in ("Run(path string, o krusty.Options) resmap.ResMap {",
               "RunWithErr(path string, o krusty.Options) error {"):
    head = "func (th Harness) " + method
    if head not in text:
        sys.exit("the test harness has no " + head)
    text = text.replace(head, head + "\n\tkrusty.SetConformanceTestName(th.t.Name())\n"
                        "\tdefer krusty.SetConformanceTestName(\"\")", 1)
open(path, "w").write(text)
PY
  rm -rf "$OUT_DIR.tmp"
  mkdir -p "$OUT_DIR.tmp"
  (
    cd "$work"
    export GOWORK=off GOFLAGS=-mod=mod KC_CONFORMANCE_OUT="$OUT_DIR.tmp"
    # Tests that fail (for example those that reach the network) still record what kustomize
    # did; a test build that does not compile records nothing, which the count below catches.
    go test -count=1 -p 1 -parallel 1 -timeout 20m ./krusty/ || true
  ) >"$LOG" 2>&1
  local case base
  # A test that builds once is named after the test alone.
  for case in "$OUT_DIR.tmp"/*__run1; do
    base="${case%__run1}"
    [[ -e "${base}__run2" ]] || mv "$case" "$base"
  done
  local count
  count="$(find "$OUT_DIR.tmp" -name case.json | wc -l)"
  ((count > 100)) || die "only $count cases were recorded (see $LOG)"
  cat >"$OUT_DIR.tmp/README.md" <<EOF
# kustomize conformance corpus

Every build that the krusty tests of $MODULE $VERSION make, recorded by
tests/kustomize/extract-conformance.sh: $count cases. Those tests are Copyright The
Kubernetes Authors, Apache License 2.0.

<Case>/case.json: test, source, build (relative to input/), load_restrictor, expect
("output": expected.yaml holds kustomize's output; "error": the build failed with
error_contains).
EOF
  # Corpora of earlier versions or recorders are stale.
  local stale
  for stale in "$CACHE_ROOT"/kustomize-conformance-v*; do
    [[ "$stale" == "$OUT_DIR.tmp" ]] || rm -rf "$stale"
  done
  mv "$OUT_DIR.tmp" "$OUT_DIR"
  log "$count cases in $OUT_DIR"
}

hold_lock extract-conformance
corpus_ok || extract
corpus_ok || die "no corpus at $OUT_DIR after the extraction"
echo "$OUT_DIR"
