#!/usr/bin/env bash
# Regenerates the SOPS test data under tests/fixtures/sops/ with the real sops and age tools:
#
#   keys/       fresh TEST-ONLY age identities and unprotected OpenPGP secret keys
#   encrypted/  the plaintext sources in plain/ encrypted by sops, one file per case
#   expected/   `sops -d` of each encrypted file, byte for byte
#   kustomize/  a secretGenerator source tree whose inputs are sops-encrypted
#   cases.json  what each case is, which keys decrypt it and which do not
#
# Every run replaces all of the above (the committed plain/ sources and README.md stay). Each
# case's claims are checked before the script ends: every listed key set must decrypt the file
# to the expected bytes, and every listed wrong key set must fail to.
#
# Needs go (first run only, to build the tools), gpg, jq and python3 with PyYAML. Nothing outside the fixture
# directory and a throwaway directory under /tmp is touched: GNUPGHOME, HOME and the sops
# key variables are set only for the commands this script runs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIX="$(cd "$HERE/../fixtures/sops" && pwd)"
PLAIN="$FIX/plain"

log() { echo "generate-fixtures: $*" >&2; }
die() { log "$*"; exit 1; }

for tool in gpg gpgconf jq base64 cmp python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
[[ -d "$PLAIN" ]] || die "missing plaintext sources in $PLAIN"

SOPS="$("$HERE/install-tools.sh")"
AGE_DIR="$("$HERE/install-tools.sh" --age-dir)"
AGE_KEYGEN="$AGE_DIR/age-keygen"

WORK="$(mktemp -d /tmp/kc-sops-fixtures.XXXXXX)"
GNUPG_HOMES=()
cleanup() {
  local home
  for home in "${GNUPG_HOMES[@]}"; do
    GNUPGHOME="$home" gpgconf --kill gpg-agent >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# An empty home, so sops finds no default age key file (~/.config/sops/age/keys.txt), no SSH
# key (~/.ssh/id_ed25519) and no keyring other than the ones handed to it here.
mkdir -p "$WORK/home"
# A config without creation rules: sops takes the keys and rules from its flags only, and
# never goes looking for a .sops.yaml above the current directory.
printf 'stores: {}\n' >"$WORK/no-rules.sops.yaml"


# run_sops GNUPGHOME AGE_KEY_FILE ARGS...: sops in the isolated environment. An empty
# AGE_KEY_FILE leaves sops without any age identity.
run_sops() {
  local gnupg="$1" agekeys="$2"
  shift 2
  local -a env_args=(-i "PATH=$PATH" "HOME=$WORK/home" "GNUPGHOME=$gnupg" "SOPS_DISABLE_VERSION_CHECK=1" "TZ=UTC")
  if [[ -n "$agekeys" ]]; then
    env_args+=("SOPS_AGE_KEY_FILE=$agekeys")
  fi
  (cd "$WORK" && env "${env_args[@]}" "$SOPS" "$@")
}

# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
KEYS="$FIX/keys"
rm -rf "$KEYS"
mkdir -p "$KEYS"

log "generating age identities"
"$AGE_KEYGEN" -o "$WORK/age1.txt" 2>/dev/null
"$AGE_KEYGEN" -o "$WORK/age2.txt" 2>/dev/null
"$AGE_KEYGEN" -o "$WORK/age3.txt" 2>/dev/null
age_recipient() { "$AGE_KEYGEN" -y "$1"; }
AGE1="$(age_recipient "$WORK/age1.txt")"
AGE2="$(age_recipient "$WORK/age2.txt")"
AGE3="$(age_recipient "$WORK/age3.txt")"
{
  echo "# TEST-ONLY age identity for the kustomize-controller SOPS fixtures. Never use it for real data."
  cat "$WORK/age1.txt"
} >"$KEYS/age-1.agekey"
{
  echo "# TEST-ONLY age identities for the kustomize-controller SOPS fixtures. Never use them for real data."
  echo "# Two identities in one file; comments and blank lines must be skipped."
  echo
  echo "# identity 2"
  cat "$WORK/age2.txt"
  echo
  echo "# identity 3"
  cat "$WORK/age3.txt"
} >"$KEYS/age-2-and-3.agekey"

log "generating OpenPGP keys (RSA 3072; ed25519 + cv25519)"
GEN_GNUPG="$WORK/gpg-gen"
mkdir -m 700 "$GEN_GNUPG"
GNUPG_HOMES+=("$GEN_GNUPG")
gpg_gen() {
  GNUPGHOME="$GEN_GNUPG" gpg --batch --quiet --pinentry-mode loopback --passphrase '' "$@" 2>"$WORK/gpg.log" ||
    { cat "$WORK/gpg.log" >&2; die "gpg $* failed"; }
}
gpg_gen --quick-gen-key 'SOPS fixture RSA (TEST ONLY) <rsa@fixtures.invalid>' rsa3072 cert,sign never
gpg_gen --quick-gen-key 'SOPS fixture ed25519 (TEST ONLY) <ed25519@fixtures.invalid>' ed25519 cert,sign never

# primary_fpr EMAIL: the fingerprint of the primary key with that user id.
primary_fpr() {
  GNUPGHOME="$GEN_GNUPG" gpg --batch --with-colons --list-secret-keys "$1" 2>/dev/null |
    awk -F: '$1 == "sec" { want = 1; next } want && $1 == "fpr" { print $10; exit }'
}
# subkey_fpr PRIMARY: the fingerprint of that key's (only) subkey.
subkey_fpr() {
  GNUPGHOME="$GEN_GNUPG" gpg --batch --with-colons --list-secret-keys "$1" 2>/dev/null |
    awk -F: '$1 == "ssb" { want = 1; next } want && $1 == "fpr" { print $10; exit }'
}
PGP_RSA="$(primary_fpr rsa@fixtures.invalid)"
PGP_ED="$(primary_fpr ed25519@fixtures.invalid)"
[[ -n "$PGP_RSA" && -n "$PGP_ED" ]] || die "could not read the generated PGP fingerprints"
gpg_gen --quick-add-key "$PGP_RSA" rsa3072 encr never
gpg_gen --quick-add-key "$PGP_ED" cv25519 encr never
PGP_RSA_SUB="$(subkey_fpr "$PGP_RSA")"
PGP_ED_SUB="$(subkey_fpr "$PGP_ED")"
[[ -n "$PGP_RSA_SUB" && -n "$PGP_ED_SUB" ]] || die "could not read the generated PGP subkey fingerprints"
GNUPGHOME="$GEN_GNUPG" gpg --batch --armor --export-secret-keys "$PGP_RSA" >"$KEYS/pgp-rsa.asc"
GNUPGHOME="$GEN_GNUPG" gpg --batch --armor --export-secret-keys "$PGP_ED" >"$KEYS/pgp-ed25519.asc"

cat >"$KEYS/fingerprints.txt" <<EOF
# TEST-ONLY keys of the kustomize-controller SOPS fixtures, written by tests/sops/generate-fixtures.sh.
# <key file> <what> <public identifier>
age-1.agekey age-recipient $AGE1
age-2-and-3.agekey age-recipient $AGE2
age-2-and-3.agekey age-recipient $AGE3
pgp-rsa.asc pgp-primary $PGP_RSA
pgp-rsa.asc pgp-encryption-subkey $PGP_RSA_SUB
pgp-ed25519.asc pgp-primary $PGP_ED
pgp-ed25519.asc pgp-encryption-subkey $PGP_ED_SUB
EOF

# All keys at once: used to make the expected outputs.
cat "$KEYS/age-1.agekey" "$KEYS/age-2-and-3.agekey" >"$WORK/all.agekeys"

# ---------------------------------------------------------------------------------------------
# Encryption
# ---------------------------------------------------------------------------------------------
ENC="$FIX/encrypted"
EXP="$FIX/expected"
KUS="$FIX/kustomize"
rm -rf "$ENC" "$EXP" "$KUS"
mkdir -p "$ENC" "$EXP" "$KUS"
: >"$WORK/cases.jsonl"

# encrypt SRC OUT [SOPS FLAGS...]: encrypts plain/SRC into OUT (a path under $FIX) with the flags
# given and no config rules.
encrypt() {
  local src="$PLAIN/$1" out="$FIX/$2"
  shift 2
  mkdir -p "$(dirname "$out")"
  run_sops "$GEN_GNUPG" "" --config "$WORK/no-rules.sops.yaml" --encrypt "$@" "$src" >"$out"
}

# encrypt_with_config SRC OUT CONFIG [SOPS FLAGS...]: as encrypt, with a .sops.yaml of its own.
encrypt_with_config() {
  local src="$PLAIN/$1" out="$FIX/$2" conf="$3"
  shift 3
  mkdir -p "$(dirname "$out")"
  run_sops "$GEN_GNUPG" "" --config "$conf" --encrypt "$@" "$src" >"$out"
}

# add_case NAME ENCRYPTED FORMAT EXPECTED KEY_SETS WRONG_KEY_SETS COVERS [DECRYPT FLAGS...]
#   KEY_SETS / WRONG_KEY_SETS: sets separated by "|", key files in a set by spaces.
# Writes EXPECTED with `sops -d` (all keys loaded) and records the case.
add_case() {
  local name="$1" enc="$2" format="$3" exp="$4" sets="$5" wrong="$6" covers="$7"
  shift 7
  local -a dflags=("$@")
  mkdir -p "$(dirname "$FIX/$exp")"
  run_sops "$GEN_GNUPG" "$WORK/all.agekeys" --config "$WORK/no-rules.sops.yaml" \
    --decrypt "${dflags[@]}" "$FIX/$enc" >"$FIX/$exp"
  jq -nc --arg name "$name" --arg enc "$enc" --arg format "$format" --arg exp "$exp" \
    --arg sets "$sets" --arg wrong "$wrong" --arg covers "$covers" \
    --argjson mac_valid "$([[ " ${dflags[*]-} " == *" --ignore-mac "* ]] && echo false || echo true)" \
    'def sets: split("|") | map(split(" ") | map(select(. != "")));
     ($sets | sets) as $ks | ($wrong | sets) as $ws |
     {name: $name, encrypted: $enc, format: $format, expected: $exp,
      keys: $ks[0], wrong_keys: $ws[0], key_sets: $ks, wrong_key_sets: $ws,
      mac_valid: $mac_valid, covers: $covers}' >>"$WORK/cases.jsonl"
}

A1="age-1.agekey"
A23="age-2-and-3.agekey"
RSA="pgp-rsa.asc"
ED="pgp-ed25519.asc"
# The usual recipient: age identity 1; identities 2 and 3 and both PGP keys cannot decrypt.
DEF=(--age "$AGE1")
DEF_WRONG="$A23 $RSA $ED"

log "encrypting the store cases"
encrypt stores/app.yaml encrypted/stores/app.yaml "${DEF[@]}"
add_case store-yaml encrypted/stores/app.yaml yaml expected/stores/app.yaml "$A1" "$DEF_WRONG" \
  "YAML store: nested map, int and strings, every value encrypted"
encrypt stores/app.json encrypted/stores/app.json "${DEF[@]}"
add_case store-json encrypted/stores/app.json json expected/stores/app.json "$A1" "$DEF_WRONG" \
  "JSON store: nested object, array, int, float, bool, null and an empty string"
encrypt stores/app.env encrypted/stores/app.env "${DEF[@]}"
add_case store-dotenv encrypted/stores/app.env dotenv expected/stores/app.env "$A1" "$DEF_WRONG" \
  "dotenv store: a comment line, an empty value, a value with spaces; metadata as sops_* lines"
encrypt stores/app.ini encrypted/stores/app.ini "${DEF[@]}"
add_case store-ini encrypted/stores/app.ini ini expected/stores/app.ini "$A1" "$DEF_WRONG" \
  "INI store: two sections with comments; metadata in a [sops] section"
encrypt stores/blob.bin encrypted/stores/blob.bin "${DEF[@]}"
add_case store-binary encrypted/stores/blob.bin binary expected/stores/blob.bin "$A1" "$DEF_WRONG" \
  "binary store: a whole file with NUL and non-UTF-8 bytes, kept in JSON as one data value"
encrypt stores/app.yaml encrypted/stores/app-yaml-as-json.json "${DEF[@]}" --input-type yaml --output-type json
add_case store-yaml-input-json-output encrypted/stores/app-yaml-as-json.json json expected/stores/app-yaml-as-json.json \
  "$A1" "$DEF_WRONG" "--input-type yaml --output-type json: a YAML source stored as sops JSON"

log "encrypting the encryption-rule cases"
encrypt rules/unencrypted-suffix-default.yaml encrypted/rules/unencrypted-suffix-default.yaml "${DEF[@]}"
add_case rule-unencrypted-suffix-default encrypted/rules/unencrypted-suffix-default.yaml yaml \
  expected/rules/unencrypted-suffix-default.yaml "$A1" "$DEF_WRONG" \
  "default rule: keys ending in _unencrypted (also nested) stay plain, the rest is encrypted"
encrypt rules/unencrypted-suffix-custom.yaml encrypted/rules/unencrypted-suffix-custom.yaml "${DEF[@]}" \
  --unencrypted-suffix _public
add_case rule-unencrypted-suffix-custom encrypted/rules/unencrypted-suffix-custom.yaml yaml \
  expected/rules/unencrypted-suffix-custom.yaml "$A1" "$DEF_WRONG" \
  "--unencrypted-suffix _public: keys ending in _public stay plain; _unencrypted is then encrypted"
encrypt rules/encrypted-suffix.yaml encrypted/rules/encrypted-suffix.yaml "${DEF[@]}" --encrypted-suffix _secret
add_case rule-encrypted-suffix encrypted/rules/encrypted-suffix.yaml yaml expected/rules/encrypted-suffix.yaml \
  "$A1" "$DEF_WRONG" "--encrypted-suffix _secret: only keys ending in _secret (also nested) are encrypted"
encrypt rules/encrypted-regex.yaml encrypted/rules/encrypted-regex.yaml "${DEF[@]}" \
  --encrypted-regex '^(password|token)$'
add_case rule-encrypted-regex encrypted/rules/encrypted-regex.yaml yaml expected/rules/encrypted-regex.yaml \
  "$A1" "$DEF_WRONG" "--encrypted-regex '^(password|token)\$': only matching keys are encrypted, the rest stays plain"
encrypt rules/unencrypted-regex.yaml encrypted/rules/unencrypted-regex.yaml "${DEF[@]}" \
  --unencrypted-regex '^(name|description)$'
add_case rule-unencrypted-regex encrypted/rules/unencrypted-regex.yaml yaml expected/rules/unencrypted-regex.yaml \
  "$A1" "$DEF_WRONG" "--unencrypted-regex '^(name|description)\$': matching keys (at any depth) stay plain"
encrypt rules/mac-only-encrypted.yaml encrypted/rules/mac-only-encrypted.yaml "${DEF[@]}" \
  --encrypted-regex '^password$' --mac-only-encrypted
add_case rule-mac-only-encrypted encrypted/rules/mac-only-encrypted.yaml yaml expected/rules/mac-only-encrypted.yaml \
  "$A1" "$DEF_WRONG" "--mac-only-encrypted with --encrypted-regex '^password\$': the MAC covers only the encrypted values"
encrypt rules/encrypted-comment-regex.yaml encrypted/rules/encrypted-comment-regex.yaml "${DEF[@]}" \
  --encrypted-comment-regex 'sops:enc'
add_case rule-encrypted-comment-regex encrypted/rules/encrypted-comment-regex.yaml yaml \
  expected/rules/encrypted-comment-regex.yaml "$A1" "$DEF_WRONG" \
  "--encrypted-comment-regex 'sops:enc': only keys under a matching comment are encrypted"
encrypt rules/unencrypted-comment-regex.yaml encrypted/rules/unencrypted-comment-regex.yaml "${DEF[@]}" \
  --unencrypted-comment-regex 'sops:plain'
add_case rule-unencrypted-comment-regex encrypted/rules/unencrypted-comment-regex.yaml yaml \
  expected/rules/unencrypted-comment-regex.yaml "$A1" "$DEF_WRONG" \
  "--unencrypted-comment-regex 'sops:plain': keys under a matching comment stay plain"

log "encrypting the YAML value cases"
encrypt yaml/multidoc.yaml encrypted/yaml/multidoc.yaml "${DEF[@]}"
add_case yaml-multidoc encrypted/yaml/multidoc.yaml yaml expected/yaml/multidoc.yaml "$A1" "$DEF_WRONG" \
  "three YAML documents, each with its own sops metadata copy, one data key"
encrypt yaml/empty-strings.yaml encrypted/yaml/empty-strings.yaml "${DEF[@]}"
add_case yaml-empty-strings encrypted/yaml/empty-strings.yaml yaml expected/yaml/empty-strings.yaml "$A1" "$DEF_WRONG" \
  "empty strings (double and single quoted, in a map and in a list)"
encrypt yaml/time.yaml encrypted/yaml/time.yaml "${DEF[@]}"
add_case yaml-time encrypted/yaml/time.yaml yaml expected/yaml/time.yaml "$A1" "$DEF_WRONG" \
  "!!timestamp values and untagged date/date-time scalars become type:time (dates come back as RFC 3339 date-times); a quoted date stays type:str"
encrypt yaml/comments.yaml encrypted/yaml/comments.yaml "${DEF[@]}"
add_case yaml-comments encrypted/yaml/comments.yaml yaml expected/yaml/comments.yaml "$A1" "$DEF_WRONG" \
  "head, inline, in-map and trailing comments, encrypted as type:comment YAML comments"
# sops writes an encrypted comment that sat inside a sequence as a sequence item. On decryption
# that item turns back into a comment but is fed to the MAC, which it was not on encryption:
# sops itself then reports a MAC mismatch (Flux, which does not check the MAC, decrypts it).
encrypt yaml/comments-in-list.yaml encrypted/yaml/comments-in-list.yaml "${DEF[@]}"
add_case yaml-comments-in-list encrypted/yaml/comments-in-list.yaml yaml expected/yaml/comments-in-list.yaml \
  "$A1" "$DEF_WRONG" \
  "comments inside a list: encrypted as type:comment sequence items; sops' own MAC check fails on them (decrypted with --ignore-mac)" \
  --ignore-mac
encrypt yaml/types.yaml encrypted/yaml/types.yaml "${DEF[@]}"
add_case yaml-types encrypted/yaml/types.yaml yaml expected/yaml/types.yaml "$A1" "$DEF_WRONG" \
  "ints (big, hex, negative), floats, bools, nulls, block scalars, nested lists and maps, empty collections, an anchor and alias"

log "encrypting the key cases"
encrypt keys/age.yaml encrypted/keys/age.yaml --age "$AGE3"
add_case key-age encrypted/keys/age.yaml yaml expected/keys/age.yaml "$A23" "$A1 $RSA $ED" \
  "age alone: recipient is identity 3, the second identity of a two-identity key file"
encrypt keys/age-multi-recipient.yaml encrypted/keys/age-multi-recipient.yaml --age "$AGE1,$AGE2" --pgp "$PGP_RSA"
add_case key-multi-recipient encrypted/keys/age-multi-recipient.yaml yaml expected/keys/age-multi-recipient.yaml \
  "$A1|$A23|$RSA" "$ED" "one key group with two age recipients and one PGP key: any one of them decrypts"
encrypt keys/pgp-rsa.yaml encrypted/keys/pgp-rsa.yaml --pgp "$PGP_RSA"
add_case key-pgp-rsa encrypted/keys/pgp-rsa.yaml yaml expected/keys/pgp-rsa.yaml "$RSA" "$ED $A1 $A23" \
  "PGP alone: RSA 3072 primary key with an RSA 3072 encryption subkey"
encrypt keys/pgp-ed25519.yaml encrypted/keys/pgp-ed25519.yaml --pgp "$PGP_ED"
add_case key-pgp-ed25519 encrypted/keys/pgp-ed25519.yaml yaml expected/keys/pgp-ed25519.yaml "$ED" "$RSA $A1 $A23" \
  "PGP alone: ed25519 primary key with a cv25519 (ECDH) encryption subkey"

cat >"$WORK/groups-age-pgp.sops.yaml" <<EOF
creation_rules:
  - shamir_threshold: 2
    key_groups:
      - age:
          - $AGE1
      - pgp:
          - $PGP_RSA
EOF
encrypt_with_config keys/groups-age-pgp.yaml encrypted/keys/groups-age-pgp.yaml "$WORK/groups-age-pgp.sops.yaml"
add_case key-groups-age-pgp encrypted/keys/groups-age-pgp.yaml yaml expected/keys/groups-age-pgp.yaml \
  "$A1 $RSA" "$A1|$RSA|$A23 $ED" \
  "two key groups (age / PGP RSA), shamir_threshold 2: both groups needed, either alone fails"
cat >"$WORK/groups-three.sops.yaml" <<EOF
creation_rules:
  - shamir_threshold: 2
    key_groups:
      - age:
          - $AGE1
      - age:
          - $AGE2
      - pgp:
          - $PGP_ED
EOF
encrypt_with_config keys/groups-three.yaml encrypted/keys/groups-three.yaml "$WORK/groups-three.sops.yaml"
add_case key-groups-three encrypted/keys/groups-three.yaml yaml expected/keys/groups-three.yaml \
  "$A1 $A23|$A1 $ED|$A23 $ED" "$A1|$A23|$ED|$RSA" \
  "three key groups (age 1 / age 2 / PGP ed25519), shamir_threshold 2: any two groups decrypt, one alone fails"

log "encrypting the Kubernetes cases"
encrypt k8s/secret.yaml encrypted/k8s/secret.yaml "${DEF[@]}" --encrypted-regex '^(data|stringData)$'
add_case k8s-secret encrypted/k8s/secret.yaml yaml expected/k8s/secret.yaml "$A1" "$DEF_WRONG" \
  "a Kubernetes Secret encrypted with --encrypted-regex '^(data|stringData)\$' (Flux's recommendation)"
# After a kustomize build, Flux hands a sops-encrypted Secret to sops as JSON with sorted keys
# (the resource's MarshalJSON). The value order changes, so the stored MAC no longer matches;
# Flux does not check it. Here: the same encrypted Secret as that JSON.
python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin), indent=2, sort_keys=True))' \
  <"$ENC/k8s/secret.yaml" >"$ENC/k8s/secret-as-sorted-json.json"
add_case k8s-secret-sorted-json encrypted/k8s/secret-as-sorted-json.json json expected/k8s/secret-as-sorted-json.json \
  "$A1" "$DEF_WRONG" \
  "the k8s-secret file converted to JSON with sorted keys as Flux decrypts built resources: values decrypt, the MAC does not match (decrypted with --ignore-mac)" \
  --ignore-mac
encrypt k8s/dockerconfig.json encrypted/k8s/dockerconfig.json "${DEF[@]}"
add_case k8s-dockerconfigjson encrypted/k8s/dockerconfig.json json expected/k8s/dockerconfig.json "$A1" "$DEF_WRONG" \
  "a sops-encrypted docker config JSON; encrypted/k8s/dockerconfigjson-secret.yaml carries exactly these bytes, base64-encoded, as data[.dockerconfigjson] of a plain Secret"
cat >"$ENC/k8s/dockerconfigjson-secret.yaml" <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: registry-credentials
  namespace: apps
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: $(base64 -w0 <"$ENC/k8s/dockerconfig.json")
EOF
# What Flux makes of it: the data value decrypted to JSON and base64-encoded again.
cat >"$EXP/k8s/dockerconfigjson-secret.yaml" <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: registry-credentials
  namespace: apps
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: $(base64 -w0 <"$EXP/k8s/dockerconfig.json")
EOF

log "building the secretGenerator tree"
cp "$PLAIN/kustomize/kustomization.yaml" "$PLAIN/kustomize/deployment.yaml" "$KUS/"
encrypt kustomize/config.yaml kustomize/config.yaml "${DEF[@]}"
add_case kustomize-generator-file-yaml kustomize/config.yaml yaml expected/kustomize/config.yaml "$A1" "$DEF_WRONG" \
  "secretGenerator files entry: an encrypted YAML file (with a head comment)"
encrypt kustomize/tls.key kustomize/tls.key "${DEF[@]}"
add_case kustomize-generator-file-binary kustomize/tls.key binary expected/kustomize/tls.key "$A1" "$DEF_WRONG" \
  "secretGenerator files entry: an encrypted binary file (extension .key, stored as sops JSON)"
encrypt kustomize/app.env kustomize/app.env "${DEF[@]}"
add_case kustomize-generator-envs kustomize/app.env dotenv expected/kustomize/app.env "$A1" "$DEF_WRONG" \
  "secretGenerator envs entry: an encrypted dotenv file"
encrypt kustomize/patch.yaml kustomize/patch.yaml "${DEF[@]}" --encrypted-regex '^value$'
add_case kustomize-patch kustomize/patch.yaml yaml expected/kustomize/patch.yaml "$A1" "$DEF_WRONG" \
  "a patches: path entry encrypted with --encrypted-regex '^value\$' (Flux decrypts patch files in place)"

jq -s . "$WORK/cases.jsonl" >"$FIX/cases.json"

# ---------------------------------------------------------------------------------------------
# What the encrypted files must show for each case to cover what it claims.
# ---------------------------------------------------------------------------------------------
# has FILE REGEX / lacks FILE REGEX (extended regular expressions, on lines)
has() { grep -Eq -- "$2" "$FIX/$1" || die "$1 lacks /$2/"; }
lacks() { ! grep -Eq -- "$2" "$FIX/$1" || die "$1 unexpectedly has /$2/"; }
log "checking that the encrypted files show what each case covers"
has encrypted/stores/app.env '^sops_mac=ENC\['
has encrypted/stores/app.env '^#ENC\[.*type:comment\]$'
has encrypted/stores/app.env '^EMPTY_VALUE=$'
has encrypted/stores/app.ini '^\[sops\]$'
has encrypted/stores/app.ini '^; ENC\[.*type:comment\]$'
has encrypted/stores/blob.bin '^	"data": "ENC\[AES256_GCM,.*type:str\]",$'
has encrypted/stores/app.json '"empty": "",'
has encrypted/stores/app.json '"fallback": null'
has encrypted/stores/app.json 'type:float'
has encrypted/stores/app.json 'type:bool'
has encrypted/stores/app-yaml-as-json.json '"mac": "ENC\['
has encrypted/rules/unencrypted-suffix-default.yaml '^    region_unencrypted: eu-west-1$'
has encrypted/rules/unencrypted-suffix-default.yaml '^    password: ENC\['
has encrypted/rules/unencrypted-suffix-custom.yaml '^replicas_public: 3$'
has encrypted/rules/unencrypted-suffix-custom.yaml '^    region_unencrypted: ENC\['
has encrypted/rules/unencrypted-suffix-custom.yaml '^    unencrypted_suffix: _public$'
has encrypted/rules/encrypted-suffix.yaml '^password_secret: ENC\['
has encrypted/rules/encrypted-suffix.yaml '^        token_secret: ENC\['
has encrypted/rules/encrypted-suffix.yaml '^        host: search-1.internal$'
has encrypted/rules/encrypted-suffix.yaml '^    encrypted_suffix: _secret$'
has encrypted/rules/encrypted-regex.yaml '^    password: ENC\['
has encrypted/rules/encrypted-regex.yaml '^    host: reports.internal$'
has encrypted/rules/encrypted-regex.yaml '^    port: 5432$'
has encrypted/rules/unencrypted-regex.yaml '^name: queue-worker$'
has encrypted/rules/unencrypted-regex.yaml '^    name: jobs$'
has encrypted/rules/unencrypted-regex.yaml '^    url: ENC\['
has encrypted/rules/mac-only-encrypted.yaml '^    mac_only_encrypted: true$'
has encrypted/rules/mac-only-encrypted.yaml '^    host: smtp.example.com$'
has encrypted/rules/encrypted-comment-regex.yaml '^password: ENC\['
has encrypted/rules/encrypted-comment-regex.yaml '^host: cache.internal$'
has encrypted/rules/encrypted-comment-regex.yaml '^    encrypted_comment_regex: sops:enc$'
has encrypted/rules/unencrypted-comment-regex.yaml '^service: ledger$'
has encrypted/rules/unencrypted-comment-regex.yaml '^password: ENC\['
has encrypted/rules/unencrypted-comment-regex.yaml '^    unencrypted_comment_regex: sops:plain$'
[[ "$(grep -c '^sops:$' "$FIX/encrypted/yaml/multidoc.yaml")" == 3 ]] || die "multidoc: expected 3 sops blocks"
has encrypted/yaml/empty-strings.yaml '^empty_single: ""$'
has encrypted/yaml/time.yaml '^rotated_at: ENC\[.*type:time\]$'
has encrypted/yaml/time.yaml '^untagged_date: ENC\[.*type:time\]$'
has encrypted/yaml/time.yaml '^quoted_date: ENC\[.*type:str\]$'
has encrypted/yaml/comments.yaml '^#ENC\[.*type:comment\]$'
has encrypted/yaml/comments.yaml 'type:str\] #ENC\[.*type:comment\]$'
has encrypted/yaml/comments-in-list.yaml '^    - ENC\[.*type:comment\]$'
has encrypted/yaml/types.yaml 'type:int\]$'
has encrypted/yaml/types.yaml 'type:float\]$'
has encrypted/yaml/types.yaml 'type:bool\]$'
has encrypted/yaml/types.yaml '^null_tilde: null$'
lacks encrypted/keys/age.yaml 'pgp:'
lacks encrypted/keys/pgp-rsa.yaml 'age1'
has encrypted/keys/pgp-rsa.yaml "fp: $PGP_RSA"
has encrypted/keys/pgp-ed25519.yaml "fp: $PGP_ED"
has encrypted/keys/age-multi-recipient.yaml "fp: $PGP_RSA"
for f in groups-age-pgp groups-three; do
  has "encrypted/keys/$f.yaml" '^    key_groups:$'
  has "encrypted/keys/$f.yaml" '^    shamir_threshold: 2$'
done
has encrypted/k8s/secret.yaml '^kind: Secret$'
has encrypted/k8s/secret.yaml '^    name: app-credentials$'
has encrypted/k8s/secret.yaml '^    password: ENC\['
has encrypted/k8s/secret.yaml '^    encrypted_regex: \^\(data\|stringData\)\$$'
lacks encrypted/k8s/dockerconfigjson-secret.yaml 'ENC\['
has kustomize/tls.key '"data": "ENC\['
has kustomize/patch.yaml '^ +value: ENC\['
has kustomize/patch.yaml '^ +- name: LICENSE_KEY$'

# ---------------------------------------------------------------------------------------------
# Verification: every claim in cases.json, with only the keys it names.
# ---------------------------------------------------------------------------------------------
# key_env SET: prepares a GNUPGHOME (in $home) and an age key file (in $age, empty when the set
# has no age key) holding exactly the key files in SET.
KEYSET_N=0
key_env() {
  local file
  KEYSET_N=$((KEYSET_N + 1))
  home="$WORK/gpg-set$KEYSET_N"
  mkdir -m 700 "$home"
  GNUPG_HOMES+=("$home")
  age=""
  for file in $1; do
    case "$file" in
      *.agekey)
        age="$WORK/set$KEYSET_N.agekeys"
        cat "$KEYS/$file" >>"$age"
        ;;
      *.asc) GNUPGHOME="$home" gpg --batch --quiet --import "$KEYS/$file" 2>/dev/null ;;
      *) die "unknown key file kind: $file" ;;
    esac
  done
}

log "checking every case with the keys it lists"
n_cases="$(jq length "$FIX/cases.json")"
for ((i = 0; i < n_cases; i++)); do
  row="$(jq -c ".[$i]" "$FIX/cases.json")"
  name="$(jq -r .name <<<"$row")"
  enc="$FIX/$(jq -r .encrypted <<<"$row")"
  exp="$FIX/$(jq -r .expected <<<"$row")"
  dflags=()
  [[ "$(jq -r .mac_valid <<<"$row")" == true ]] || dflags=(--ignore-mac)
  [[ -s "$exp" ]] || die "$name: expected output $exp is empty"
  if ((${#dflags[@]})); then
    # A case marked mac_valid=false must really fail sops' own MAC check.
    key_env "$(jq -r '.keys | join(" ")' <<<"$row")"
    if run_sops "$home" "$age" --config "$WORK/no-rules.sops.yaml" --decrypt "$enc" >/dev/null 2>"$WORK/err"; then
      die "$name: claims a MAC mismatch, but sops decrypts it with the MAC check on"
    fi
    grep -q 'MAC mismatch' "$WORK/err" || die "$name: sops failed for another reason than the MAC: $(cat "$WORK/err")"
  fi
  while IFS= read -r set; do
    key_env "$set"
    run_sops "$home" "$age" --config "$WORK/no-rules.sops.yaml" --decrypt "${dflags[@]}" "$enc" >"$WORK/out" ||
      die "$name: keys [$set] failed to decrypt"
    cmp -s "$WORK/out" "$exp" || die "$name: keys [$set] decrypt to something other than $exp"
  done < <(jq -r '.key_sets[] | join(" ")' <<<"$row")
  while IFS= read -r set; do
    key_env "$set"
    if run_sops "$home" "$age" --config "$WORK/no-rules.sops.yaml" --decrypt "${dflags[@]}" "$enc" >/dev/null 2>&1; then
      die "$name: wrong keys [$set] decrypted it"
    fi
  done < <(jq -r '.wrong_key_sets[] | join(" ")' <<<"$row")
done

total="$(du -sb "$FIX" | cut -f1)"
((total < 1048576)) || die "fixtures take $total bytes; keep them under 1 MiB"
log "done: $n_cases cases, $total bytes under $FIX"
