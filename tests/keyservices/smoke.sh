#!/usr/bin/env bash
# Smoke test of the local key services the SOPS tests encrypt against: moto's fake AWS (KMS,
# STS, IAM) and a `vault server -dev` with the transit engine. It proves the real sops (the
# reference, from tests/sops/install-tools.sh) encrypts and decrypts through them, prints the
# `sops:` metadata sops writes for kms and hc_vault entries, and records, as checked
# expectations, how the servers answer the failures the decryptor has to report (wrong key,
# garbage ciphertext, wrong region, denied credentials, wrong Vault token, missing Vault key).
#
# Usage: tests/keyservices/smoke.sh
# stdout: the report (round trips, metadata blocks, error responses). Progress goes to stderr.
# Exit status: 0 if every check held; non-zero, with the failing check named, otherwise.
# Environment: KC_TEST_CACHE (cache root, as the install scripts), SMOKE_READY_TIMEOUT (seconds
#              a server gets to answer its readiness probe; default 60).
#
# The servers listen on free ports on 127.0.0.1 and are stopped on exit. sops runs with HOME and
# the AWS config files pointed into a temporary directory, so nothing of the caller's (a
# ~/.vault-token, ~/.aws/config, an age key file) takes part.
#
# What sops needs to reach them:
#   moto:  AWS_ENDPOINT_URL=http://127.0.0.1:<port> (or AWS_ENDPOINT_URL_KMS plus, for a key with
#          a role, AWS_ENDPOINT_URL_STS: the AssumeRole call does not use the KMS variable), and
#          any AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY. No AWS_REGION: sops signs each request
#          for the region in the key's ARN, and moto keeps one key store per region.
#   vault: VAULT_TOKEN. No VAULT_ADDR: sops takes the address from the key's URL (and the
#          metadata's vault_address), which SOPS_HC_VAULT_ALLOWLIST may restrict.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
READY_TIMEOUT="${SMOKE_READY_TIMEOUT:-60}"
ACCOUNT=123456789012 # moto's default account

log() { echo "smoke: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}
section() { printf '\n=== %s\n' "$*"; }

command -v curl >/dev/null || die "curl is required"
SOPS="$(bash "$ROOT/tests/sops/install-tools.sh")"
AGE_DIR="$(bash "$ROOT/tests/sops/install-tools.sh" --age-dir)"
MOTO_SERVER="$(bash "$HERE/install-moto.sh")"
MOTO_PY="$(dirname "$MOTO_SERVER")/python"
VAULT="$(bash "$HERE/install-vault.sh")"

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Keep sops (and vault's token helper) away from the caller's home and AWS configuration.
mkdir -p "$WORK/home"
export HOME="$WORK/home" AWS_CONFIG_FILE="$WORK/home/aws-config" AWS_SHARED_CREDENTIALS_FILE="$WORK/home/aws-credentials"
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL \
  AWS_ENDPOINT_URL_KMS AWS_ENDPOINT_URL_STS AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE \
  VAULT_ADDR VAULT_TOKEN SOPS_AGE_KEY SOPS_AGE_KEY_FILE SOPS_AGE_KEY_CMD SOPS_HC_VAULT_ALLOWLIST XDG_CONFIG_HOME

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_ready NAME URL PID LOGFILE: polls URL until it answers 2xx, for at most $READY_TIMEOUT s.
wait_ready() {
  local name="$1" url="$2" pid="$3" logfile="$4" deadline=$((SECONDS + READY_TIMEOUT))
  until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || die "$name exited before it was ready; its log:
$(tail -n 30 "$logfile")"
    ((SECONDS < deadline)) || die "$name did not answer $url within ${READY_TIMEOUT}s; its log:
$(tail -n 30 "$logfile")"
    sleep 0.2
  done
  log "$name is ready at $url"
}

# start_moto VAR: starts a moto server on a free port; sets VAR to its endpoint URL.
start_moto() {
  local port logfile
  port="$(free_port)"
  logfile="$WORK/moto-$port.log"
  "$MOTO_SERVER" -H 127.0.0.1 -p "$port" >"$logfile" 2>&1 &
  PIDS+=($!)
  wait_ready "moto_server" "http://127.0.0.1:$port/" "$!" "$logfile"
  printf -v "$1" 'http://127.0.0.1:%s' "$port"
}

# A minimal AWS client on botocore (moto's venv has it), printing the HTTP status on the first
# line and the raw body after it, so the report shows exactly what the server sent.
cat >"$WORK/aws.py" <<'EOF'
"""aws.py ENDPOINT REGION SERVICE OPERATION PAYLOAD [ACCESS_KEY SECRET_KEY [SESSION_TOKEN]]

OPERATION "TrentService.Decrypt" is a JSON 1.1 call (X-Amz-Target); a bare name ("AssumeRole") is
a query-protocol call whose PAYLOAD is the url-encoded parameters. ACCESS_KEY "-" sends the
request unsigned. Credentials default to test/test."""
import sys
import urllib.error
import urllib.request

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

endpoint, region, service, op, payload = sys.argv[1:6]
creds = sys.argv[6:9]
ak, sk, token = creds + ["test", "test", None][len(creds):]
if "." in op:
    headers = {"X-Amz-Target": op, "Content-Type": "application/x-amz-json-1.1"}
    data = payload
else:
    version = {"sts": "2011-06-15", "iam": "2010-05-08"}[service]
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    data = f"Action={op}&Version={version}" + (f"&{payload}" if payload else "")
req = AWSRequest(method="POST", url=endpoint + "/", data=data.encode(), headers=headers)
if ak != "-":
    SigV4Auth(Credentials(ak, sk, token), service, region).add_auth(req)
prepared = req.prepare()
request = urllib.request.Request(prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST")
try:
    with urllib.request.urlopen(request, timeout=30) as resp:
        status, body = resp.status, resp.read().decode()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read().decode()
print(status)
print(body)
EOF

# aws ENDPOINT REGION SERVICE OPERATION PAYLOAD [creds...]: sets STATUS and BODY.
aws() {
  local out
  out="$("$MOTO_PY" "$WORK/aws.py" "$@")" || die "aws.py $* failed"
  STATUS="$(head -n 1 <<<"$out")"
  BODY="$(tail -n +2 <<<"$out")"
}

# json FIELD.PATH: prints a field of the JSON document in $BODY.
json() {
  python3 -c '
import json, sys
v = json.loads(sys.argv[2])
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$1" "$BODY"
}

# xml TAG: prints the text of the first <TAG> in $BODY.
xml() {
  python3 -c 'import re, sys; m = re.search("<%s>(.*?)</%s>" % (sys.argv[1], sys.argv[1]), sys.argv[2], re.S); print(m[1] if m else "")' "$1" "$BODY"
}

# expect WHAT STATUS PATTERN: checks the last response's status and that its body contains PATTERN,
# then prints both.
expect() {
  local what="$1" status="$2" pattern="$3"
  printf -- '- %s: HTTP %s\n  %s\n' "$what" "$STATUS" "$BODY"
  [[ "$STATUS" == "$status" ]] || die "$what: expected HTTP $status, got $STATUS: $BODY"
  [[ "$BODY" == *"$pattern"* ]] || die "$what: expected the body to contain '$pattern', got: $BODY"
}

urlencode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# sops metadata block of an encrypted YAML file (everything from the top-level `sops:` key).
metadata() { sed -n '/^sops:/,$p' "$1"; }

# roundtrip NAME FILE: checks that `sops decrypt` of FILE (with the current environment) gives the
# plaintext back, byte for byte.
roundtrip() {
  local out="$WORK/decrypted.yaml"
  "$SOPS" decrypt "$2" >"$out" 2>"$WORK/decrypt.err" ||
    die "$1: sops decrypt failed: $(cat "$WORK/decrypt.err")"
  cmp -s "$WORK/plain.yaml" "$out" || die "$1: decrypted output differs from the plaintext"
  echo "- $1: encrypt + decrypt round trip OK"
}

# encrypt OUT SOPS-ARGS...: encrypts the plaintext with the given key options into OUT.
encrypt() {
  local out="$1"
  shift
  "$SOPS" encrypt "$@" "$WORK/plain.yaml" >"$out" 2>"$WORK/encrypt.err" ||
    die "sops encrypt $* failed: $(cat "$WORK/encrypt.err")"
}

# In sops's own output style (4-space indent), so a decrypt gives it back byte for byte.
cat >"$WORK/plain.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata:
    name: smoke
stringData:
    password: hunter2
EOF

###################################################################################################
section "AWS KMS (moto $("$MOTO_PY" -c 'import moto; print(moto.__version__)'))"
start_moto MOTO
aws "$MOTO" us-east-1 kms TrentService.CreateKey '{"KeySpec":"SYMMETRIC_DEFAULT","KeyUsage":"ENCRYPT_DECRYPT","Description":"smoke"}'
[[ "$STATUS" == 200 ]] || die "CreateKey: HTTP $STATUS: $BODY"
KEY="$(json KeyMetadata.Arn)"
aws "$MOTO" us-east-1 kms TrentService.CreateKey '{"KeySpec":"SYMMETRIC_DEFAULT","KeyUsage":"ENCRYPT_DECRYPT"}'
OTHER_KEY="$(json KeyMetadata.Arn)"
aws "$MOTO" eu-west-1 kms TrentService.CreateKey '{"KeySpec":"SYMMETRIC_DEFAULT","KeyUsage":"ENCRYPT_DECRYPT"}'
EU_KEY="$(json KeyMetadata.Arn)"
ROLE="arn:aws:iam::$ACCOUNT:role/sops-smoke"
echo "key: $KEY"
echo "other key: $OTHER_KEY"
echo "key in eu-west-1: $EU_KEY"

export AWS_ENDPOINT_URL="$MOTO" AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
encrypt "$WORK/kms.yaml" --kms "$KEY"
roundtrip "kms" "$WORK/kms.yaml"
encrypt "$WORK/kms-eu.yaml" --kms "$EU_KEY"
roundtrip "kms, key in eu-west-1" "$WORK/kms-eu.yaml"
encrypt "$WORK/kms-context.yaml" --kms "$KEY" --encryption-context 'a:b,env:prod'
roundtrip "kms with encryption context" "$WORK/kms-context.yaml"
encrypt "$WORK/kms-role.yaml" --kms "$KEY+$ROLE"
roundtrip "kms with a role (AssumeRole through AWS_ENDPOINT_URL)" "$WORK/kms-role.yaml"

# Per-service variables: KMS alone is not enough for a key with a role (sops's STS client
# resolves its own endpoint, sts.<region>.amazonaws.com, which does not resolve here).
(
  unset AWS_ENDPOINT_URL
  export AWS_ENDPOINT_URL_KMS="$MOTO"
  roundtrip "kms with AWS_ENDPOINT_URL_KMS only" "$WORK/kms.yaml"
  if "$SOPS" decrypt "$WORK/kms-role.yaml" >/dev/null 2>"$WORK/role-no-sts.err"; then
    die "a key with a role decrypted without AWS_ENDPOINT_URL_STS"
  fi
  grep -q 'failed to assume role' "$WORK/role-no-sts.err" || die "unexpected error: $(cat "$WORK/role-no-sts.err")"
  echo "- kms with a role, AWS_ENDPOINT_URL_KMS only: fails (failed to assume role ... sts.us-east-1.amazonaws.com)"
  export AWS_ENDPOINT_URL_STS="$MOTO"
  roundtrip "kms with a role, AWS_ENDPOINT_URL_KMS + AWS_ENDPOINT_URL_STS" "$WORK/kms-role.yaml"
)
# moto switches account with the role: credentials of a role in another account see that
# account's (empty) KMS.
if "$SOPS" encrypt --kms "$KEY+arn:aws:iam::111111111111:role/elsewhere" "$WORK/plain.yaml" \
  >/dev/null 2>"$WORK/role-other-account.err"; then
  die "encrypting with a role in another account succeeded"
fi
grep -q 'NotFoundException' "$WORK/role-other-account.err" || die "unexpected error: $(cat "$WORK/role-other-account.err")"
echo "- kms with a role in another account: NotFoundException (moto gives the role's account's credentials)"

section "KMS + age in one file"
"$AGE_DIR/age-keygen" -o "$WORK/age-key.txt" 2>/dev/null
AGE_RECIPIENT="$("$AGE_DIR/age-keygen" -y "$WORK/age-key.txt")"
encrypt "$WORK/kms-age.yaml" --kms "$KEY" --age "$AGE_RECIPIENT"
roundtrip "kms + age, with KMS (no age key available)" "$WORK/kms-age.yaml"
(
  # KMS unreachable (a closed port): sops falls back to the age key.
  closed_port="$(free_port)"
  # shellcheck disable=SC2030 # deliberately local to this subshell
  export AWS_ENDPOINT_URL="http://127.0.0.1:$closed_port" SOPS_AGE_KEY_FILE="$WORK/age-key.txt"
  roundtrip "kms + age, with age only (KMS unreachable)" "$WORK/kms-age.yaml"
)

section "sops metadata: kms"
metadata "$WORK/kms.yaml"
section "sops metadata: kms with encryption context"
metadata "$WORK/kms-context.yaml"
section "sops metadata: kms with a role"
metadata "$WORK/kms-role.yaml"
section "sops metadata: kms + age"
metadata "$WORK/kms-age.yaml"

section "KMS Decrypt error responses (moto)"
aws "$MOTO" us-east-1 kms TrentService.Encrypt "{\"KeyId\":\"$OTHER_KEY\",\"Plaintext\":\"$(printf 'data key' | base64)\"}"
OTHER_BLOB="$(json CiphertextBlob)"
aws "$MOTO" us-east-1 kms TrentService.Encrypt "{\"KeyId\":\"$KEY\",\"Plaintext\":\"$(printf 'data key' | base64)\",\"EncryptionContext\":{\"a\":\"b\"}}"
BLOB="$(json CiphertextBlob)"
GARBAGE="$(head -c 96 /dev/urandom | base64 -w0)"
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$BLOB\",\"EncryptionContext\":{\"a\":\"b\"}}"
expect "right key, right context" 200 '"Plaintext"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$OTHER_BLOB\"}"
expect "(a) ciphertext of another key, KeyId given" 400 '"__type":"AccessDeniedException"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"CiphertextBlob\":\"$OTHER_BLOB\"}"
expect "(a) ciphertext of another key, no KeyId (KMS finds the key from the blob)" 200 '"Plaintext"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$GARBAGE\"}"
expect "(a) garbage ciphertext" 400 '"__type":"InvalidCiphertextException"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$BLOB\",\"EncryptionContext\":{\"a\":\"c\"}}"
expect "wrong encryption context" 400 '"__type":"InvalidCiphertextException"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$BLOB\"}"
expect "missing encryption context" 400 '"__type":"InvalidCiphertextException"'
aws "$MOTO" eu-west-1 kms TrentService.Decrypt "{\"KeyId\":\"$KEY\",\"CiphertextBlob\":\"$BLOB\",\"EncryptionContext\":{\"a\":\"b\"}}"
expect "(b) us-east-1 key ARN, request signed for eu-west-1" 400 '"__type": "NotFoundException"'
aws "$MOTO" eu-west-1 kms TrentService.Decrypt "{\"CiphertextBlob\":\"$BLOB\",\"EncryptionContext\":{\"a\":\"b\"}}"
expect "(b) us-east-1 ciphertext, no KeyId, request signed for eu-west-1" 400 '"__type":"AccessDeniedException"'
aws "$MOTO" us-east-1 kms TrentService.Decrypt "{\"KeyId\":\"arn:aws:kms:us-east-1:$ACCOUNT:key/00000000-0000-0000-0000-000000000000\",\"CiphertextBlob\":\"$BLOB\"}"
expect "key that does not exist" 400 '"__type": "NotFoundException"'

section "STS (moto)"
aws "$MOTO" us-east-1 sts AssumeRole "RoleArn=$(urlencode "$ROLE")&RoleSessionName=smoke"
expect "AssumeRole (the role need not exist)" 200 '<AssumeRoleResponse'
aws "$MOTO" us-east-1 sts AssumeRoleWithWebIdentity "RoleArn=$(urlencode "$ROLE")&RoleSessionName=smoke&WebIdentityToken=not-a-jwt" -
expect "AssumeRoleWithWebIdentity, unsigned as the SDKs send it (the token is not checked)" 200 '<AssumeRoleWithWebIdentityResponse'

section "IAM enforcement (a second moto, auth switched on after setup)"
start_moto MOTO_IAM
aws "$MOTO_IAM" us-east-1 kms TrentService.CreateKey '{"KeySpec":"SYMMETRIC_DEFAULT","KeyUsage":"ENCRYPT_DECRYPT"}'
IAM_KEY="$(json KeyMetadata.Arn)"
aws "$MOTO_IAM" us-east-1 kms TrentService.Encrypt "{\"KeyId\":\"$IAM_KEY\",\"Plaintext\":\"$(printf 'data key' | base64)\"}"
IAM_BLOB="$(json CiphertextBlob)"
declare -A AK SK
for user in allowed denied; do
  aws "$MOTO_IAM" us-east-1 iam CreateUser "UserName=$user"
  [[ "$STATUS" == 200 ]] || die "CreateUser $user: HTTP $STATUS: $BODY"
  aws "$MOTO_IAM" us-east-1 iam CreateAccessKey "UserName=$user"
  AK[$user]="$(xml AccessKeyId)"
  SK[$user]="$(xml SecretAccessKey)"
done
ALLOW_KMS='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"kms:*","Resource":"*"}]}'
DENY_DECRYPT='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"kms:*","Resource":"*"},{"Effect":"Deny","Action":"kms:Decrypt","Resource":"*"}]}'
aws "$MOTO_IAM" us-east-1 iam PutUserPolicy "UserName=allowed&PolicyName=kms&PolicyDocument=$(urlencode "$ALLOW_KMS")"
[[ "$STATUS" == 200 ]] || die "PutUserPolicy: HTTP $STATUS: $BODY"
aws "$MOTO_IAM" us-east-1 iam PutUserPolicy "UserName=denied&PolicyName=kms&PolicyDocument=$(urlencode "$DENY_DECRYPT")"
[[ "$STATUS" == 200 ]] || die "PutUserPolicy: HTTP $STATUS: $BODY"
# The body must be sent as text: with curl's default form content type moto reads it as empty
# and answers 500.
curl -fsS -X POST "$MOTO_IAM/moto-api/reset-auth" -H 'Content-Type: text/plain' --data-binary 0 >/dev/null ||
  die "could not switch on moto's IAM checks"
echo "(POST /moto-api/reset-auth with body 0: every request from now on is authenticated and authorized)"
D="{\"KeyId\":\"$IAM_KEY\",\"CiphertextBlob\":\"$IAM_BLOB\"}"
aws "$MOTO_IAM" us-east-1 kms TrentService.Decrypt "$D" "${AK[allowed]}" "${SK[allowed]}"
expect "(c) user allowed kms:*" 200 '"Plaintext"'
aws "$MOTO_IAM" us-east-1 kms TrentService.Decrypt "$D" "${AK[denied]}" "${SK[denied]}"
expect "(c) user with an explicit Deny of kms:Decrypt" 403 '<Code>AccessDenied</Code>'
aws "$MOTO_IAM" us-east-1 kms TrentService.Decrypt "$D"
expect "(c) unknown access key (test/test)" 403 '<Code>InvalidClientTokenId</Code>'
aws "$MOTO_IAM" us-east-1 kms TrentService.Decrypt "$D" "${AK[allowed]}" wrong-secret
expect "(c) right access key, wrong secret" 403 '<Code>SignatureDoesNotMatch</Code>'
aws "$MOTO_IAM" us-east-1 sts AssumeRole "RoleArn=$(urlencode "$ROLE")&RoleSessionName=smoke" "${AK[allowed]}" "${SK[allowed]}"
expect "(c) AssumeRole by a user without sts:AssumeRole" 403 '<Code>AccessDenied</Code>'
(
  # shellcheck disable=SC2031 # deliberately local to this subshell
  export AWS_ENDPOINT_URL="$MOTO_IAM" AWS_ACCESS_KEY_ID="${AK[allowed]}" AWS_SECRET_ACCESS_KEY="${SK[allowed]}"
  encrypt "$WORK/kms-iam.yaml" --kms "$IAM_KEY"
  roundtrip "kms, IAM enforced, allowed user" "$WORK/kms-iam.yaml"
  export AWS_ACCESS_KEY_ID="${AK[denied]}" AWS_SECRET_ACCESS_KEY="${SK[denied]}"
  if "$SOPS" decrypt "$WORK/kms-iam.yaml" >/dev/null 2>"$WORK/denied.err"; then
    die "the denied user decrypted"
  fi
  echo "- kms, IAM enforced, denied user: sops decrypt fails; its message:"
  sed -n '/Group 0/,/^$/{/^$/d;s/^/    /;p}' "$WORK/denied.err"
)

###################################################################################################
section "HashiCorp Vault transit ($("$VAULT" version))"
VAULT_PORT="$(free_port)"
VAULT_ADDR_="http://127.0.0.1:$VAULT_PORT"
# HOME points into $WORK (exported above), so the dev server's token helper cannot touch the
# caller's ~/.vault-token; -dev-no-store-token keeps it from writing one at all.
"$VAULT" server -dev -dev-root-token-id=root -dev-listen-address="127.0.0.1:$VAULT_PORT" \
  -dev-no-store-token >"$WORK/vault.log" 2>&1 &
PIDS+=($!)
wait_ready "vault" "$VAULT_ADDR_/v1/sys/health" "$!" "$WORK/vault.log"

# vault_api METHOD PATH [JSON] [TOKEN]: sets STATUS and BODY.
vault_api() {
  local out args=(-sS -o - -w '\n%{http_code}' -X "$1")
  # The token defaults to root; an empty fourth argument sends none.
  [[ -z "${4-root}" ]] || args+=(-H "X-Vault-Token: ${4-root}")
  [[ -z "${3:-}" ]] || args+=(-H 'Content-Type: application/json' --data "$3")
  out="$(curl "${args[@]}" "$VAULT_ADDR_$2")" || die "curl $1 $2 failed"
  STATUS="$(tail -n 1 <<<"$out")"
  BODY="$(sed '$d' <<<"$out")"
}
vault_api POST /v1/sys/mounts/sops '{"type":"transit"}'
[[ "$STATUS" == 204 ]] || die "mounting transit at sops/: HTTP $STATUS: $BODY"
vault_api POST /v1/sops/keys/firstkey '{}'
[[ "$STATUS" == 200 || "$STATUS" == 204 ]] || die "creating key firstkey: HTTP $STATUS: $BODY"
vault_api POST /v1/sops/keys/secondkey '{}'
[[ "$STATUS" == 200 || "$STATUS" == 204 ]] || die "creating key secondkey: HTTP $STATUS: $BODY"

export VAULT_TOKEN=root
encrypt "$WORK/vault.yaml" --hc-vault-transit "$VAULT_ADDR_/v1/sops/keys/firstkey"
roundtrip "hc_vault" "$WORK/vault.yaml"
(
  export VAULT_TOKEN=wrong
  if "$SOPS" decrypt "$WORK/vault.yaml" >/dev/null 2>"$WORK/vault-wrong-token.err"; then
    die "decrypted with a wrong Vault token"
  fi
  echo "- hc_vault with a wrong token: sops decrypt fails; its message:"
  sed -n '/Group 0/,/^$/{/^$/d;s/^/    /;p}' "$WORK/vault-wrong-token.err"
)
(
  export SOPS_HC_VAULT_ALLOWLIST="http://vault.example:8200"
  if "$SOPS" decrypt "$WORK/vault.yaml" >/dev/null 2>"$WORK/vault-allowlist.err"; then
    die "decrypted with an allowlist that excludes the server"
  fi
  grep -q 'Allowlist does not allow' "$WORK/vault-allowlist.err" || die "unexpected error: $(cat "$WORK/vault-allowlist.err")"
  echo "- hc_vault with SOPS_HC_VAULT_ALLOWLIST not listing the server: fails (Allowlist does not allow $VAULT_ADDR_)"
)

section "sops metadata: hc_vault"
metadata "$WORK/vault.yaml"

section "Vault transit error responses"
vault_api POST /v1/sops/encrypt/firstkey "{\"plaintext\":\"$(printf 'data key' | base64)\"}"
expect "encrypt" 200 '"ciphertext":"vault:v1:'
CIPHERTEXT="$(json data.ciphertext)"
vault_api POST /v1/sops/decrypt/firstkey "{\"ciphertext\":\"$CIPHERTEXT\"}"
expect "decrypt" 200 '"plaintext":'
vault_api POST /v1/sops/decrypt/firstkey "{\"ciphertext\":\"$CIPHERTEXT\"}" wrong-token
expect "decrypt with a wrong token" 403 'permission denied'
vault_api POST /v1/sops/decrypt/firstkey "{\"ciphertext\":\"$CIPHERTEXT\"}" ""
expect "decrypt with no token" 403 '{"errors":["permission denied"]}'
vault_api POST /v1/sops/decrypt/nosuchkey "{\"ciphertext\":\"$CIPHERTEXT\"}"
expect "decrypt with a key that does not exist" 400 '{"errors":["encryption key not found"]}'
vault_api POST /v1/sops/decrypt/secondkey "{\"ciphertext\":\"$CIPHERTEXT\"}"
expect "decrypt another key's ciphertext" 400 '{"errors":["cipher: message authentication failed"]}'
vault_api POST /v1/sops/decrypt/firstkey '{"ciphertext":"vault:v1:bm90IGEgcmVhbCBjaXBoZXJ0ZXh0"}'
expect "decrypt garbage (vault:v1: prefix)" 400 '{"errors":["cipher: message authentication failed"]}'
vault_api POST /v1/sops/decrypt/firstkey '{"ciphertext":"garbage"}'
expect "decrypt garbage (no prefix)" 400 '{"errors":["invalid ciphertext: no prefix"]}'
vault_api POST /v1/sops/decrypt/firstkey "{\"ciphertext\":\"${CIPHERTEXT/vault:v1:/vault:v9:}\"}"
expect "decrypt a key version that does not exist" 400 '{"errors":["invalid ciphertext: version is too new"]}'
vault_api POST /v1/nosuchmount/decrypt/firstkey "{\"ciphertext\":\"$CIPHERTEXT\"}"
expect "decrypt on a path with no mount" 404 'route entry not found'

section "done"
echo "all checks passed"
