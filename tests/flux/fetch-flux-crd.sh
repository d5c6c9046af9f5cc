#!/usr/bin/env bash
# Fetches Flux's own Kustomization CRD (config/crd/bases of the kustomize-controller module zip,
# from the Go module proxy) for tests/crd.rs, which checks that ours is compatible with it. It
# lands in a cache outside the repository, keyed by version.
#
# Usage: tests/flux/fetch-flux-crd.sh
# stdout: the path of the cached CRD file (only that). Everything else goes to stderr.
# Environment: FLUX_CRD_VERSION (default v1.10.1, the release whose API this controller serves),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
set -euo pipefail

VERSION="${FLUX_CRD_VERSION:-v1.10.1}"
MODULE="github.com/fluxcd/kustomize-controller"
FILE="config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT="$CACHE_ROOT/flux-crd-$VERSION/$(basename "$FILE")"

if [[ ! -s "$OUT" ]]; then
  command -v go >/dev/null || die "go is required to fetch $MODULE@$VERSION from the Go module proxy"
  command -v python3 >/dev/null || die "python3 is required to read the module zip"
  log "fetching $FILE of $MODULE $VERSION"
  mkdir -p "$(dirname "$OUT")"
  # The zip is all that is needed: `go mod download` reports its path even when the module's
  # go line is newer than the local toolchain (it then also fails with an Error, ignored here).
  info="$(go mod download -json "$MODULE@$VERSION" || true)"
  python3 -c '
import json, sys, zipfile
info = json.load(sys.stdin)
zip_path, member, out = info.get("Zip"), sys.argv[1], sys.argv[2]
if not zip_path:
    sys.exit("go mod download %s@%s: %s" % (info.get("Path"), info.get("Version"), info.get("Error", "no zip")))
name = "%s@%s/%s" % (info["Path"], info["Version"], member)
with zipfile.ZipFile(zip_path) as z, open(out + ".tmp", "wb") as f:
    f.write(z.read(name))
' "$FILE" "$OUT" <<<"$info"
  mv "$OUT.tmp" "$OUT"
fi
echo "$OUT"
