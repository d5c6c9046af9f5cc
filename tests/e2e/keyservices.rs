//! SOPS key services end to end: Secrets encrypted by the real sops with AWS KMS (moto) and
//! Vault transit (a Vault dev server) are decrypted by the controller with the credentials
//! Flux would use (the decryption Secret's `sops.aws-kms` and `sops.vault-token`, the
//! decryption ServiceAccount's IAM role) and applied; bad credentials fail the build with a
//! message naming the service and key, and nothing is applied.

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};

use super::support::keyservers::{KeyServers, ROLE, key_servers};
use super::*;

const SHARD: &str = "keyservices";

/// The controller's own namespace (`RUNTIME_NAMESPACE`), holding its
/// `--sops-vault-configmap` ConfigMap `vault-instances`, which trusts the Vault dev server
/// with login path `auth/kubernetes/login`.
fn runtime_namespace() -> &'static str {
    static NAMESPACE: OnceLock<String> = OnceLock::new();
    NAMESPACE.get_or_init(|| {
        let name = support::unique_name("t-ks-runtime");
        let config = format!(
            "instances:\n- address: {}\n  loginPath: auth/kubernetes/login\n",
            key_servers().vault
        );
        let manifest = json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "vault-instances", "namespace": name},
                    "data": {"config.yaml": config},
                },
            ],
        });
        let mut apply = support::kubectl()
            .args(["apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("kubectl apply");
        apply
            .stdin
            .take()
            .expect("stdin")
            .write_all(manifest.to_string().as_bytes())
            .expect("write the manifest");
        assert!(
            apply.wait().expect("kubectl").success(),
            "kubectl apply failed"
        );
        name
    })
}

/// A controller that reaches moto through `AWS_ENDPOINT_URL` and has no AWS credentials or
/// Vault token of its own: whatever it decrypts, it decrypted with the Kustomization's.
fn keyservice_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let servers = key_servers();
        start_controller_binary_with_env(
            SHARD,
            std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
            &[
                &format!(
                    "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={SHARD}",
                    run_id()
                ),
                "--sops-vault-configmap=vault-instances",
            ],
            &[
                ("RUNTIME_NAMESPACE", runtime_namespace().to_owned()),
                ("AWS_ENDPOINT_URL", servers.moto.clone()),
                ("AWS_ACCESS_KEY_ID", String::new()),
                ("AWS_SECRET_ACCESS_KEY", String::new()),
                ("VAULT_TOKEN", String::new()),
                ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
            ],
        )
    })
}

pub(super) fn secret_manifest(ns: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\nstringData:\n  password: {value}\n"
    )
}

/// `plain` encrypted by sops with `args`, only the Secret's values encrypted (as Flux users
/// do).
pub(super) fn encrypted(servers: &KeyServers, plain: &str, args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(support::unique_name("ks-e2e"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret.yaml"), plain).unwrap();
    let mut all = vec!["encrypt", "--encrypted-regex", "^(data|stringData)$"];
    all.extend_from_slice(args);
    all.push("secret.yaml");
    String::from_utf8(servers.sops(&dir, &all)).unwrap()
}

/// A namespace whose artifact holds a KMS-encrypted Secret `from-kms` and a Vault-encrypted
/// Secret `from-vault`.
async fn fixture(test: &str) -> (kube::Client, TestNamespace) {
    fixture_with(test, |kms| kms).await
}

/// [`fixture`], the KMS-encrypted file passed through `edit` first.
async fn fixture_with(
    test: &str,
    edit: impl Fn(String) -> String,
) -> (kube::Client, TestNamespace) {
    keyservice_controller();
    let servers = key_servers();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, test).await;
    let kms = encrypted(
        servers,
        &secret_manifest(ns.name(), "from-kms", "kms-plaintext-1"),
        &["--kms", &servers.kms_arn],
    );
    let vault = encrypted(
        servers,
        &secret_manifest(ns.name(), "from-vault", "vault-plaintext-2"),
        &["--hc-vault-transit", &servers.vault_key],
    );
    create_git_source(&client, ns.name(), "repo").await;
    let files = [
        (
            "deploy/kustomization.yaml".to_owned(),
            "resources:\n- kms.yaml\n- vault.yaml\n".to_owned(),
        ),
        ("deploy/kms.yaml".to_owned(), edit(kms)),
        ("deploy/vault.yaml".to_owned(), vault),
    ];
    publish(&client, ns.name(), "repo", 1, &files).await;
    (client, ns)
}

async fn create_secret(client: &kube::Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create Secret");
}

/// moto's credentials in the form of a `sops.aws-kms` entry (moto accepts any key).
const AWS_STATIC_CREDENTIALS: &str = "aws_access_key_id: test\naws_secret_access_key: test\n";

/// Secret `sops-creds` with [`AWS_STATIC_CREDENTIALS`] and the Vault token `vault_token`, and
/// the Kustomization `app` of the `keyservices` shard decrypting with it.
async fn create_with_credentials(client: &kube::Client, ns: &str, vault_token: &str) {
    create_secret(
        client,
        ns,
        "sops-creds",
        &[
            ("sops.aws-kms", AWS_STATIC_CREDENTIALS),
            ("sops.vault-token", vault_token),
        ],
    )
    .await;
    create(
        client,
        ns,
        json!({"provider": "sops", "secretRef": {"name": "sops-creds"}}),
    )
    .await;
}

async fn create_service_account(client: &kube::Client, ns: &str, name: &str, annotations: Value) {
    let account: ServiceAccount = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
    }))
    .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount");
}

async fn create(client: &kube::Client, ns: &str, decryption: Value) {
    create_labelled_kustomization(
        client,
        ns,
        "app",
        "repo",
        json!({"decryption": decryption}),
        json!({SHARD_LABEL: SHARD}),
    )
    .await;
}

async fn password(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get Secret")?;
    let value = secret.data?.remove("password")?;
    Some(String::from_utf8_lossy(&value.0).into_owned())
}

async fn wait_ready_shard(
    client: &kube::Client,
    ns: &str,
    expected: ConditionStatus,
) -> (String, String) {
    wait_for(
        WAIT,
        "the Kustomization's Ready condition",
        async || match ready(client, ns, "app").await {
            Some((status, reason, message)) if status == expected => Ok((reason, message)),
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&keyservice_controller().log(), 30)
            )),
        },
    )
    .await
}

#[tokio::test]
async fn secret_credentials_open_kms_and_vault_keys() {
    let (client, ns) = fixture("ks-secret").await;
    // A trailing newline, as `kubectl create secret --from-file` leaves it, is trimmed.
    let token = format!("{}\n", super::support::keyservers::VAULT_TOKEN);
    create_with_credentials(&client, ns.name(), &token).await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::True).await;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    assert_eq!(
        password(&client, ns.name(), "from-kms").await.as_deref(),
        Some("kms-plaintext-1")
    );
    assert_eq!(
        password(&client, ns.name(), "from-vault").await.as_deref(),
        Some("vault-plaintext-2")
    );
}

#[tokio::test]
async fn a_decryption_service_account_assumes_its_iam_role() {
    let (client, ns) = fixture("ks-identity").await;
    create_secret(
        &client,
        ns.name(),
        "vault-only",
        &[("sops.vault-token", super::support::keyservers::VAULT_TOKEN)],
    )
    .await;
    create_service_account(
        &client,
        ns.name(),
        "sops-decryptor",
        json!({"eks.amazonaws.com/role-arn": ROLE}),
    )
    .await;
    create(
        &client,
        ns.name(),
        json!({"provider": "sops", "secretRef": {"name": "vault-only"}, "serviceAccountName": "sops-decryptor"}),
    )
    .await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::True).await;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    assert_eq!(
        password(&client, ns.name(), "from-kms").await.as_deref(),
        Some("kms-plaintext-1")
    );
    // The next run takes the AWS session from the token cache, as Flux's cache serves it.
    let (status, _, message) =
        super::apply::reconcile_now(&client, ns.name(), "app", keyservice_controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    let metrics = keyservice_controller().metrics();
    let hit = format!(
        "gotk_token_cache_events_total{{event_type=\"cache_hit\",kind=\"Kustomization\",name=\"app\",namespace=\"{}\",operation=\"decrypt_with_aws\"}} ",
        ns.name()
    );
    assert!(
        metrics.lines().any(|l| l.starts_with(&hit)),
        "no {hit} in:\n{}",
        metrics
            .lines()
            .filter(|l| l.starts_with("gotk_token"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test]
async fn bad_credentials_fail_the_build_and_apply_nothing() {
    keyservice_controller();
    let servers = key_servers();
    // Malformed static credentials: refused on import, naming the entry.
    let (client, ns) = fixture("ks-malformed").await;
    create_secret(
        &client,
        ns.name(),
        "sops-creds",
        &[("sops.aws-kms", "- a list\n- not: credentials\n")],
    )
    .await;
    create(
        &client,
        ns.name(),
        json!({"provider": "sops", "secretRef": {"name": "sops-creds"}}),
    )
    .await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::False).await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("failed to import 'sops.aws-kms' data from sops decryption Secret"),
        "{message}"
    );

    // A wrong Vault token: the build fails naming the service and the key; the KMS Secret,
    // which would have decrypted, is not applied either.
    let (client, ns) = fixture("ks-denied").await;
    create_with_credentials(&client, ns.name(), "not-the-token").await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::False).await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("HashiCorp Vault transit")
            && message.contains(&servers.vault_key)
            && message.contains("permission denied"),
        "{message}"
    );
    assert!(
        !message.contains("not-the-token") && !message.contains("plaintext"),
        "{message}"
    );
    assert_eq!(password(&client, ns.name(), "from-kms").await, None);
    assert_eq!(password(&client, ns.name(), "from-vault").await, None);

    // The key's ARN names another region than the key's: KMS there does not know it. The
    // build fails naming the service and the ARN; the Vault Secret, which would have
    // decrypted, is not applied either.
    let moved = servers.kms_arn.replace("us-east-1", "eu-west-1");
    let (client, ns) = fixture_with("ks-region", |kms| kms.replace(&servers.kms_arn, &moved)).await;
    create_with_credentials(&client, ns.name(), super::support::keyservers::VAULT_TOKEN).await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::False).await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("AWS KMS")
            && message.contains(&moved)
            && message.contains("NotFoundException"),
        "{message}"
    );
    assert_eq!(password(&client, ns.name(), "from-vault").await, None);

    // The spiffe credential provider without a SPIFFE Broker (this controller has no
    // --spiffe-broker-endpoint) fails naming the account and the flags to set.
    let (client, ns) = fixture("ks-spiffe").await;
    create_service_account(
        &client,
        ns.name(),
        "spiffe-sa",
        json!({
            "credential.auth.fluxcd.io/provider": "spiffe",
            "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/decryptor",
        }),
    )
    .await;
    create(
        &client,
        ns.name(),
        json!({"provider": "sops", "serviceAccountName": "spiffe-sa"}),
    )
    .await;
    let (reason, message) = wait_ready_shard(&client, ns.name(), ConditionStatus::False).await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("spiffe-sa")
            && message.contains("asks for the spiffe credential provider")
            && message.contains("--spiffe-broker-endpoint"),
        "{message}"
    );
}

/// Vault's Kubernetes auth method on the Vault dev server, checking tokens with this
/// cluster's TokenReview API as `reviewer_jwt`, and a role `role` for the
/// ServiceAccount `decryptor` of `ns`, whose tokens must carry Vault's address as audience
/// (the audience Flux asks for).
async fn configure_vault_kubernetes_auth(
    servers: &KeyServers,
    ns: &str,
    role: &str,
    reviewer_jwt: &str,
) {
    use super::support::keyservers::http;
    let kubeconfig = kube::config::Kubeconfig::read_from(support::kubeconfig_path())
        .expect("read the test kubeconfig");
    let cluster = kubeconfig.clusters[0].cluster.as_ref().expect("a cluster");
    let server = cluster.server.clone().expect("the API server's URL");
    let ca = cluster
        .certificate_authority_data
        .as_deref()
        .map(|data| {
            use base64::Engine;
            let pem = base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64 CA");
            String::from_utf8(pem).expect("PEM CA")
        })
        .expect("the cluster's CA");
    // Enabling twice answers 400 "path is already in use": fine for the second test.
    let _ = http(
        &servers.vault,
        "POST",
        "/v1/sys/auth/kubernetes",
        Some(r#"{"type":"kubernetes"}"#),
    );
    let config = json!({
        "kubernetes_host": server,
        "kubernetes_ca_cert": ca,
        "token_reviewer_jwt": reviewer_jwt,
        "disable_local_ca_jwt": true,
    });
    let (status, body) = http(
        &servers.vault,
        "POST",
        "/v1/auth/kubernetes/config",
        Some(&config.to_string()),
    );
    assert!(status / 100 == 2, "kubernetes auth config: {status} {body}");
    let policy = json!({"policy": "path \"sops/decrypt/*\" { capabilities = [\"update\"] }"});
    let (status, body) = http(
        &servers.vault,
        "PUT",
        "/v1/sys/policies/acl/sops-decrypt",
        Some(&policy.to_string()),
    );
    assert!(status / 100 == 2, "policy: {status} {body}");
    let definition = json!({
        "bound_service_account_names": ["decryptor"],
        "bound_service_account_namespaces": [ns],
        "audience": servers.vault,
        "token_policies": ["sops-decrypt"],
        "token_ttl": "10m",
    });
    let (status, body) = http(
        &servers.vault,
        "POST",
        &format!("/v1/auth/kubernetes/role/{role}"),
        Some(&definition.to_string()),
    );
    assert!(status / 100 == 2, "role: {status} {body}");
}

/// A fixture whose ServiceAccount `decryptor` (with `annotations`) must log in to Vault as
/// `role` to open the Vault key; the KMS key opens with the Secret's static credentials.
async fn vault_login_fixture(test: &str, role: &dyn Fn(&str) -> String, annotations: Value) {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let (client, ns) = fixture(test).await;
    let servers = key_servers();
    // Vault reviews tokens as `vault-reviewer`, which may review tokens.
    create_service_account(&client, ns.name(), "vault-reviewer", json!({})).await;
    let binding_name = format!("{}-token-review", ns.name());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": binding_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": "vault-reviewer", "namespace": ns.name()}],
    }))
    .unwrap();
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind system:auth-delegator");
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }))
    .unwrap();
    let issued: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns.name())
        .create_subresource("token", "vault-reviewer", &PostParams::default(), &request)
        .await
        .expect("a token for vault-reviewer");
    let reviewer_jwt = issued.status.expect("token").token;
    let role = role(ns.name());
    configure_vault_kubernetes_auth(servers, ns.name(), &role, &reviewer_jwt).await;
    create_secret(
        &client,
        ns.name(),
        "aws-only",
        &[("sops.aws-kms", AWS_STATIC_CREDENTIALS)],
    )
    .await;
    let mut annotations = annotations;
    if let Some(map) = annotations.as_object_mut() {
        for value in map.values_mut() {
            if value == "ROLE" {
                *value = json!(role);
            }
        }
    }
    create_service_account(&client, ns.name(), "decryptor", annotations).await;
    create(
        &client,
        ns.name(),
        json!({"provider": "sops", "secretRef": {"name": "aws-only"}, "serviceAccountName": "decryptor"}),
    )
    .await;
    let outcome = wait_ready_shard(&client, ns.name(), ConditionStatus::True).await;
    let _ = bindings.delete(&binding_name, &Default::default()).await;
    assert_eq!(outcome.0, "ReconciliationSucceeded", "{}", outcome.1);
    assert_eq!(
        password(&client, ns.name(), "from-vault").await.as_deref(),
        Some("vault-plaintext-2")
    );
}

#[tokio::test]
async fn a_decryption_service_account_logs_in_to_vault() {
    vault_login_fixture(
        "ks-vault-login",
        &|ns| format!("sops-{ns}"),
        json!({
            "transit-engine.auth.fluxcd.io/login-path": "auth/kubernetes/login",
            "transit-engine.auth.fluxcd.io/role": "ROLE",
        }),
    )
    .await;
}

/// Without the annotations, `--sops-vault-configmap` gives the login path for the address
/// and the role is `<namespace>_<name>`, as in Flux.
#[tokio::test]
async fn the_vault_configmap_gives_the_login_path() {
    vault_login_fixture("ks-vault-cm", &|ns| format!("{ns}_decryptor"), json!({})).await;
}

/// Flux's controller (v1.9.5) for the parity check, with the same environment as ours.
fn flux_keyservice_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let servers = key_servers();
        let flux =
            support::reference_tool("KC_FLUX_KC_BIN", "tests/bench/install-flux-controller.sh");
        start_controller_binary_with_env(
            "keyservices-flux",
            &flux,
            &[&format!(
                "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}=keyservices-flux",
                run_id()
            )],
            &[
                ("AWS_ENDPOINT_URL", servers.moto.clone()),
                ("AWS_ACCESS_KEY_ID", String::new()),
                ("AWS_SECRET_ACCESS_KEY", String::new()),
                ("VAULT_TOKEN", String::new()),
                ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
            ],
        )
    })
}

/// The same Secret entries, artifact and Kustomization given to Flux's controller and to
/// ours: both apply the same plaintext, and both refuse a wrong Vault token as BuildFailed.
#[tokio::test]
async fn flux_reads_the_same_credential_entries() {
    flux_keyservice_controller();
    for (shard, token, expected) in [
        ("keyservices-flux", "root", ConditionStatus::True),
        (SHARD, "root", ConditionStatus::True),
        ("keyservices-flux", "wrong", ConditionStatus::False),
        (SHARD, "wrong", ConditionStatus::False),
    ] {
        let (client, ns) = fixture("ks-parity").await;
        create_secret(
            &client,
            ns.name(),
            "sops-creds",
            &[
                ("sops.aws-kms", AWS_STATIC_CREDENTIALS),
                ("sops.vault-token", token),
            ],
        )
        .await;
        create_labelled_kustomization(
            &client,
            ns.name(),
            "app",
            "repo",
            json!({"decryption": {"provider": "sops", "secretRef": {"name": "sops-creds"}}}),
            json!({SHARD_LABEL: shard}),
        )
        .await;
        let what = format!("{shard} with Vault token {token:?}: Ready={expected:?}");
        let (reason, message) = wait_for(WAIT, &what, async || {
            match ready(&client, ns.name(), "app").await {
                Some((status, reason, message)) if status == expected => Ok((reason, message)),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        if expected == ConditionStatus::True {
            assert_eq!(reason, "ReconciliationSucceeded", "{shard}: {message}");
            assert_eq!(
                password(&client, ns.name(), "from-kms").await.as_deref(),
                Some("kms-plaintext-1"),
                "{shard}"
            );
            assert_eq!(
                password(&client, ns.name(), "from-vault").await.as_deref(),
                Some("vault-plaintext-2"),
                "{shard}"
            );
        } else {
            assert_eq!(reason, "BuildFailed", "{shard}: {message}");
            assert!(message.contains("permission denied"), "{shard}: {message}");
            assert_eq!(
                password(&client, ns.name(), "from-kms").await,
                None,
                "{shard}"
            );
        }
    }
}
