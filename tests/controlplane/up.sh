#!/usr/bin/env bash
# Starts (idempotently) a throwaway Kubernetes cluster on loopback for the integration tests, the
# benchmarks and the demo: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and
# kwok simulating two nodes and their kubelets. Deployments roll out, pods become Ready, Jobs
# complete (or fail, for pods labelled pod-container-running-failed.stage.kwok.x-k8s.io=true),
# and namespaces finish terminating, at a few hundred MiB and no container runtime.
#
# Usage: tests/controlplane/up.sh [STATE_DIR]      (default STATE_DIR: <repo>/.controlplane)
#
# - Binaries come from install-binaries.sh (built once into ~/.cache/kustomize-controller-tests).
# - STATE_DIR holds the PKI, etcd data, logs (one NAME.log per process), pid files, the admin
#   kubeconfig (STATE_DIR/kubeconfig) and a `bin` symlink to the Kubernetes binaries used.
# - If STATE_DIR already runs a healthy control plane, only the CRDs are re-applied.
# - Installs every CustomResourceDefinition found in <repo>/crds/ plus the source-controller CRDs
#   (GitRepository, OCIRepository, Bucket, ExternalArtifact) and waits until they are Established.
# - Concurrent callers are serialised with flock on STATE_DIR/lock.
#
# stdout: the kubeconfig path (only that). Everything else goes to stderr.
# - Then starts Flux's source-controller and a Git server on loopback (tests/flux/source-up.sh),
#   unless KC_NO_SOURCE_CONTROLLER=1 (the benches).
# With KC_APISERVER_ONLY=1 only etcd and kube-apiserver run: a second, bare cluster that the
# tests use as the remote cluster of spec.kubeConfig. Its API server also accepts EKS tokens
# (provider `aws`) through a token webhook, eks-authenticator.py, which is the STS and EKS
# double too; STATE_DIR/eks.env gives its address (EKS_STS_ENDPOINT) and the cluster name
# (EKS_CLUSTER_NAME) it expects.
# Environment: KC_READY_TIMEOUT (seconds to wait for /readyz, default 120),
#              KC_LOCK_TIMEOUT (seconds to wait for another up.sh, default 3600),
#              K8S_VERSION, SOURCE_CONTROLLER_VERSION, KC_TEST_CACHE (see install-binaries.sh).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=tests/controlplane/lib.sh
source "$SCRIPT_DIR/lib.sh"

READY_TIMEOUT="${KC_READY_TIMEOUT:-120}"
LOCK_TIMEOUT="${KC_LOCK_TIMEOUT:-3600}"
START_TIME=$SECONDS

require_tools "the local control plane" openssl python3 flock setsid base64
# go (and its version) only when a binary still has to be built.
"$SCRIPT_DIR/install-binaries.sh" --check || exit 1

STATE_DIR="${1:-$REPO_ROOT/.controlplane}"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)"
KUBECONFIG_FILE="$STATE_DIR/kubeconfig"
# A fresh start wipes STATE_DIR: never do that to a directory up.sh did not create.
if [[ ! -e "$STATE_DIR/$CP_MARKER" ]] \
  && [[ -n "$(find "$STATE_DIR" -mindepth 1 -maxdepth 1 ! -name lock -print -quit)" ]]; then
  die "$STATE_DIR is not empty and was not created by up.sh; pick another STATE_DIR"
fi

# --- serialise concurrent callers (fd 9 is closed for every child we leave running) ---------------
exec 9>"$STATE_DIR/lock"
if ! flock -n 9; then
  log "another up.sh holds $STATE_DIR/lock; waiting (up to ${LOCK_TIMEOUT}s)"
  flock -w "$LOCK_TIMEOUT" 9 || die "timed out after ${LOCK_TIMEOUT}s waiting for $STATE_DIR/lock"
fi

# --- binaries ----------------------------------------------------------------------------------------
CACHE_ROOT="$("$SCRIPT_DIR/install-binaries.sh" </dev/null 9>&-)" \
  || die "install-binaries.sh failed (see its messages above)"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
KWOK_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION"
SOURCE_CRD_DIR="$CACHE_ROOT/source-controller-$SOURCE_CONTROLLER_VERSION"
for bin in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [[ -x "$BIN_DIR/$bin" ]] || die "$BIN_DIR/$bin is missing after install-binaries.sh"
done
[[ -x "$KWOK_DIR/kwok" ]] || die "$KWOK_DIR/kwok is missing after install-binaries.sh"
KUBECTL="$BIN_DIR/kubectl"

kubectl_admin() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

readyz() {
  [[ -s "$KUBECONFIG_FILE" ]] || return 1
  kubectl_admin get --raw=/readyz --request-timeout=5s >/dev/null 2>&1
}

# Every process of the cluster, in start order (stopped in reverse).
PROCESSES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
if [[ "${KC_APISERVER_ONLY:-}" == 1 ]]; then
  PROCESSES=(eks-authenticator etcd kube-apiserver)
fi
# The EKS cluster name the remote cluster's token webhook expects.
EKS_CLUSTER_NAME=kc-test-remote

healthy() {
  local name
  for name in "${PROCESSES[@]}"; do
    is_running "$STATE_DIR" "$name" || return 1
  done
  readyz
}

stop_all() {
  local i
  for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do
    stop_process "$STATE_DIR" "${PROCESSES[i]}" 5
  done
}

print_log_tails() {
  local name
  for name in "${PROCESSES[@]}"; do
    if [[ -f "$STATE_DIR/$name.log" ]]; then
      log "----- last 40 lines of $STATE_DIR/$name.log -----"
      tail -n 40 "$STATE_DIR/$name.log" >&2 || true
    fi
  done
}

fail_start() {
  log "error: $*"
  print_log_tails
  stop_all
  log "logs are kept in $STATE_DIR"
  exit 1
}

# start_bg NAME CMD...: runs CMD detached (own session, survives the caller), logs to NAME.log.
start_bg() {
  local name="$1"
  shift
  setsid nohup "$@" </dev/null >"$STATE_DIR/$name.log" 2>&1 9>&- 8>&- &
  echo "$!" >"$STATE_DIR/$name.pid"
}

generate_pki() {
  local pki="$STATE_DIR/pki"
  mkdir -p "$pki"
  chmod 700 "$pki"
  cat >"$pki/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = placeholder
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1,DNS:localhost
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  (
    cd "$pki"
    umask 077
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -subj "/CN=kustomize-controller-test-ca" -days 3650 \
      -config openssl.cnf -extensions ca -out ca.crt
    # sign NAME SUBJECT EXTENSIONS
    sign() {
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -config openssl.cnf -out "$1.csr"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -CAserial ca.srl \
        -days 3650 -extfile openssl.cnf -extensions "$3" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr"
    }
    sign apiserver "/CN=kube-apiserver" server
    sign admin "/O=system:masters/CN=admin" client
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub
  )
}

write_kubeconfig() {
  local port="$1" pki="$STATE_DIR/pki" tmp
  tmp="$(mktemp "$STATE_DIR/kubeconfig.XXXXXX")"
  chmod 600 "$tmp"
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kustomize-controller-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 <"$pki/admin.crt")
    client-key-data: $(base64 -w0 <"$pki/admin.key")
contexts:
- name: kustomize-controller-test
  context:
    cluster: kustomize-controller-test
    user: admin
    namespace: default
current-context: kustomize-controller-test
EOF
  mv "$tmp" "$KUBECONFIG_FILE"
}

start_control_plane() {
  log "starting a fresh control plane in $STATE_DIR"
  # The demo's controller and artifact server (STATE_DIR/demo) belonged to the old cluster.
  stop_recorded_processes "$STATE_DIR"
  stop_all
  # Wipe everything but the lock we are holding.
  find "$STATE_DIR" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
  touch "$STATE_DIR/$CP_MARKER"
  ln -sfn "$BIN_DIR" "$STATE_DIR/bin"

  generate_pki
  local etcd_client_port etcd_peer_port apiserver_port
  read -r etcd_client_port etcd_peer_port apiserver_port <<<"$(free_ports 3)"
  printf 'ETCD_CLIENT_PORT=%s\nETCD_PEER_PORT=%s\nAPISERVER_PORT=%s\n' \
    "$etcd_client_port" "$etcd_peer_port" "$apiserver_port" >"$STATE_DIR/ports.env"
  write_kubeconfig "$apiserver_port"

  local etcd_client="http://127.0.0.1:$etcd_client_port" etcd_peer="http://127.0.0.1:$etcd_peer_port"
  start_bg etcd "$BIN_DIR/etcd" \
    --name=kc-test \
    --data-dir="$STATE_DIR/etcd-data" \
    --listen-client-urls="$etcd_client" \
    --advertise-client-urls="$etcd_client" \
    --listen-peer-urls="$etcd_peer" \
    --initial-advertise-peer-urls="$etcd_peer" \
    --initial-cluster="kc-test=$etcd_peer" \
    --unsafe-no-fsync \
    --log-level=warn

  local pki="$STATE_DIR/pki" webhook_args=()
  if [[ "${KC_APISERVER_ONLY:-}" == 1 ]]; then
    start_eks_authenticator "https://127.0.0.1:$apiserver_port" "$pki/ca.crt"
    webhook_args=(--authentication-token-webhook-config-file="$STATE_DIR/authn-webhook.yaml"
      --authentication-token-webhook-version=v1)
  fi
  # No ServiceAccount admission (kwok's pods need no token volume, and a pod created before the
  # controller-manager made the namespace's `default` ServiceAccount would be refused) and no
  # endpoint reconciler (127.0.0.1 is not a valid endpoint IP).
  start_bg kube-apiserver "$BIN_DIR/kube-apiserver" \
    --etcd-servers="$etcd_client" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$apiserver_port" \
    --cert-dir="$STATE_DIR/apiserver-certs" \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --authorization-mode=RBAC \
    --service-cluster-ip-range=10.0.0.0/24 \
    --disable-admission-plugins=ServiceAccount \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    --profiling=false \
    "${webhook_args[@]}"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until readyz; do
    is_running "$STATE_DIR" etcd || fail_start "etcd exited during startup"
    is_running "$STATE_DIR" kube-apiserver || fail_start "kube-apiserver exited during startup"
    ((SECONDS < deadline)) || fail_start "kube-apiserver not ready after ${READY_TIMEOUT}s"
    sleep 0.5
  done
  log "control plane ready on https://127.0.0.1:$apiserver_port (etcd on $etcd_client)"
  if [[ "${KC_APISERVER_ONLY:-}" != 1 ]]; then
    start_workload_controllers
  fi
}

# start_eks_authenticator API_SERVER_URL CA_FILE: the EKS token webhook, STS and EKS double of
# the remote cluster (which DescribeCluster answers with that URL and CA), and the webhook's
# kubeconfig.
start_eks_authenticator() {
  local port
  read -r port <<<"$(free_ports 1)"
  start_bg eks-authenticator python3 "$SCRIPT_DIR/eks-authenticator.py" "$STATE_DIR" "$port" \
    "$EKS_CLUSTER_NAME" "$1" "$2"
  cat >"$STATE_DIR/authn-webhook.yaml" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: eks-authenticator
  cluster:
    server: http://127.0.0.1:$port/authenticate
users:
- name: kube-apiserver
contexts:
- name: webhook
  context:
    cluster: eks-authenticator
    user: kube-apiserver
current-context: webhook
EOF
  printf 'EKS_STS_ENDPOINT=http://127.0.0.1:%s\nEKS_CLUSTER_NAME=%s\n' "$port" "$EKS_CLUSTER_NAME" \
    >"$STATE_DIR/eks.env"
}

# kube-controller-manager, kube-scheduler and kwok, with client limits high enough that the
# cluster is never what a benchmark measures.
start_workload_controllers() {
  local pki="$STATE_DIR/pki" kwok_port
  read -r kwok_port <<<"$(free_ports 1)"
  start_bg kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$KUBECONFIG_FILE" \
    --secure-port=0 \
    --leader-elect=false \
    --service-account-private-key-file="$pki/sa.key" \
    --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=false \
    --kube-api-qps=1000 \
    --kube-api-burst=2000 \
    --concurrent-deployment-syncs=10 \
    --concurrent-replicaset-syncs=10 \
    --profiling=false
  cat >"$STATE_DIR/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG_FILE
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
EOF
  start_bg kube-scheduler "$BIN_DIR/kube-scheduler" \
    --config="$STATE_DIR/kube-scheduler.yaml" \
    --secure-port=0 \
    --profiling=false
  local configs=() stage
  for stage in "$KWOK_DIR"/stages/*.yaml; do configs+=(--config="$stage"); done
  start_bg kwok "$KWOK_DIR/kwok" \
    --kubeconfig="$KUBECONFIG_FILE" \
    "${configs[@]}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --cidr=10.244.0.0/16 \
    --node-ip=10.0.1.1 \
    --server-address="127.0.0.1:$kwok_port"

  local node
  for node in kwok-node-0 kwok-node-1; do
    kubectl_admin apply --server-side --field-manager=kustomize-controller-tests -f - >/dev/null <<EOF \
      || fail_start "creating the kwok node $node failed"
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $node
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    type: kwok
EOF
  done
  local deadline=$((SECONDS + READY_TIMEOUT)) name
  until [[ "$(kubectl_admin get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}' 2>/dev/null)" == "True True " ]]; do
    for name in kube-controller-manager kube-scheduler kwok; do
      is_running "$STATE_DIR" "$name" || fail_start "$name exited during startup"
    done
    ((SECONDS < deadline)) || fail_start "the kwok nodes did not become Ready within ${READY_TIMEOUT}s"
    sleep 0.5
  done
  log "kube-controller-manager, kube-scheduler and kwok running; nodes kwok-node-0 and kwok-node-1 Ready"
}


install_crds() {
  local files=() f
  shopt -s nullglob
  local ours=("$REPO_ROOT"/crds/*.yaml "$REPO_ROOT"/crds/*.yml)
  local theirs=("$SOURCE_CRD_DIR"/*.yaml)
  shopt -u nullglob
  ((${#theirs[@]} > 0)) || die "no source-controller CRDs in $SOURCE_CRD_DIR"
  for f in "${ours[@]}"; do
    if grep -q '^kind: CustomResourceDefinition' "$f"; then
      files+=(-f "$f")
    fi
  done
  if ((${#files[@]} == 0)); then
    log "note: $REPO_ROOT/crds/ has no CustomResourceDefinition yet; installing only the source-controller CRDs"
  else
    log "installing $((${#files[@]} / 2)) CRD file(s) from $REPO_ROOT/crds/"
  fi
  for f in "${theirs[@]}"; do files+=(-f "$f"); done

  local applied crds=()
  applied="$(kubectl_admin apply --server-side --force-conflicts \
    --field-manager=kustomize-controller-tests -o name "${files[@]}")" \
    || die "applying CRDs failed"
  mapfile -t crds < <(grep '^customresourcedefinition' <<<"$applied")
  ((${#crds[@]} > 0)) || die "kubectl apply reported no CRDs: $applied"
  kubectl_admin wait --for=condition=Established --timeout=60s "${crds[@]}" >/dev/null \
    || die "CRDs did not become Established within 60s"
  log "CRDs established: ${crds[*]##*/}"
}

if healthy; then
  log "control plane in $STATE_DIR is already running"
else
  start_control_plane
fi
install_crds
# source-controller and the Git server: not for the bare remote cluster, nor for the benches (their
# controllers read the same in-process artifact server, and the API server's CPU is theirs alone).
if [[ "${KC_APISERVER_ONLY:-}" != 1 && "${KC_NO_SOURCE_CONTROLLER:-}" != 1 ]]; then
  "$REPO_ROOT/tests/flux/source-up.sh" "$STATE_DIR" </dev/null || die "source-up.sh failed"
fi

log "ready in $((SECONDS - START_TIME))s. To use it:"
log "  export KUBECONFIG=$KUBECONFIG_FILE"
log "  export PATH=$STATE_DIR/bin:\$PATH   # kubectl $K8S_VERSION"
log "  stop it with: $SCRIPT_DIR/down.sh${1:+ $STATE_DIR}"
echo "$KUBECONFIG_FILE"
