#!/usr/bin/env bash
# Installs moto's standalone server (a local fake of the AWS APIs) from PyPI, for the tests that
# decrypt SOPS files whose data key is wrapped by AWS KMS (`sops --kms`): they start
# `moto_server` on a free local port, create a KMS key there, and encrypt with the real sops
# against it (see tests/keyservices/smoke.sh). It lands in a Python virtualenv in a cache outside
# the repository, keyed by version, so only the first run pays for the install. Nothing
# installed here is ever part of the product.
#
# Usage: tests/keyservices/install-moto.sh
# stdout: the path of the venv's `moto_server` executable (only that). Everything else goes to
#         stderr; pip's own output goes to <cache root>/moto-<version>.install.log. The venv's
#         python (with boto3, which moto depends on) sits next to it, in the same bin directory.
# Environment: MOTO_VERSION (default 5.2.5), PYTHON (default python3; needs the venv module),
#              KC_TEST_CACHE (cache root, default ~/.cache/kustomize-controller-tests).
#
# Only the `server` extra is installed: it carries flask and the rest of the server's
# dependencies; moto's `kms`, `sts` and `iam` extras declare no dependencies of their own (the
# services are in the base package). Only moto is pinned; pip resolves the rest, and the
# resolved set is written to <venv>/requirements.freeze.txt for the record.
set -euo pipefail

VERSION="${MOTO_VERSION:-5.2.5}"
PYTHON="${PYTHON:-python3}"
# shellcheck source=tests/peer-lib.sh
source "$(dirname "$0")/../peer-lib.sh"
OUT_DIR="$CACHE_ROOT/moto-$VERSION"
BIN="$OUT_DIR/bin/moto_server"
INSTALL_LOG="$CACHE_ROOT/moto-$VERSION.install.log"

# True if the venv exists, has moto_server, and its python imports moto at the expected version.
# (The venv's scripts have its absolute path in their shebangs, so it is built in place, not
# moved: the stamp file, written last, marks it complete.)
install_ok() {
  [[ -f "$OUT_DIR/.installed" && -x "$BIN" ]] &&
    [[ "$("$OUT_DIR/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" == "$VERSION" ]]
}

install() {
  command -v "$PYTHON" >/dev/null || die "$PYTHON is required to install moto"
  local started=$SECONDS
  log "installing moto[server]==$VERSION into $OUT_DIR (first run only; takes a minute); pip's output: $INSTALL_LOG"
  rm -rf "$OUT_DIR"
  : >"$INSTALL_LOG"
  "$PYTHON" -m venv "$OUT_DIR" >>"$INSTALL_LOG" 2>&1 || die "$PYTHON -m venv $OUT_DIR failed (see $INSTALL_LOG)"
  {
    "$OUT_DIR/bin/python" -m pip install --disable-pip-version-check --no-input --upgrade pip &&
      "$OUT_DIR/bin/python" -m pip install --disable-pip-version-check --no-input "moto[server]==$VERSION"
  } >>"$INSTALL_LOG" 2>&1 || {
    rm -rf "$OUT_DIR"
    die "pip install moto[server]==$VERSION failed (last lines of $INSTALL_LOG follow)
$(tail -n 20 "$INSTALL_LOG")"
  }
  "$OUT_DIR/bin/python" -m pip freeze --disable-pip-version-check >"$OUT_DIR/requirements.freeze.txt"
  echo "$VERSION" >"$OUT_DIR/.installed"
  log "installed $BIN in $((SECONDS - started)) s (venv: $(du -sh "$OUT_DIR" | cut -f1))"
}

# Serialise concurrent installs, with a lock file of this script's own (the other install
# scripts hold theirs while they build).
hold_lock install-moto
install_ok || install
install_ok || die "$OUT_DIR does not hold moto $VERSION"
echo "$BIN"
