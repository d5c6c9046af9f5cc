//! Remote clusters on a cloud (`spec.kubeConfig.configMapRef` with provider `aws`, `azure`,
//! `gcp`): the second test API server authenticates EKS tokens through a token webhook that,
//! as aws-iam-authenticator does, sends the presigned STS `GetCallerIdentity` request the
//! token holds (to an STS double that verifies its SigV4 signature, cluster name included)
//! and maps the caller's ARN to a user, and accepts the Entra ID and Google access tokens the
//! same double issued; RBAC there grants those users one namespace
//! (tests/controlplane/eks-authenticator.py, started by up.sh with the remote cluster).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use super::*;

const SHARD: &str = "cloud-clusters";
const ACCOUNT: &str = "123456789012";
/// The role of the ConfigMap's ServiceAccount, and the user the remote cluster sees for it.
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/flux-deployer";
/// The controller's own (static) identity in the STS double, and its user.
const CONTROLLER_ARN: &str = "arn:aws:iam::123456789012:user/kc-controller";

/// `KEY=value` lines of the remote cluster's `eks.env` (written by up.sh).
fn eks_env() -> BTreeMap<String, String> {
    let path = support::remote_kubeconfig_path().with_file_name("eks.env");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (restart the remote cluster with up.sh)",
                path.display()
            )
        })
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn authenticator_log() -> String {
    let path = support::remote_kubeconfig_path().with_file_name("eks-authenticator.log");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A controller whose AWS endpoints are the double's and whose own credentials are the
/// double's static test key.
fn cloud_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let env = eks_env();
        start_controller_binary_with_env(
            SHARD,
            std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
            &[&format!(
                "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={SHARD}",
                run_id()
            )],
            &[
                ("AWS_ENDPOINT_URL", env["EKS_STS_ENDPOINT"].clone()),
                ("AWS_ACCESS_KEY_ID", "AKIAKCTESTEKS0000000".to_owned()),
                (
                    "AWS_SECRET_ACCESS_KEY",
                    "kc-test-eks-static-secret".to_owned(),
                ),
                ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
                // The double is the Entra ID and Google token endpoint too.
                ("AZURE_AUTHORITY_HOST", env["EKS_STS_ENDPOINT"].clone()),
                ("AZURE_TENANT_ID", "kc-test.onmicrosoft.com".to_owned()),
                ("AZURE_CLIENT_ID", AKS_CLIENT.to_owned()),
                ("AZURE_CLIENT_SECRET", AKS_SECRET.to_owned()),
                (
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    google_credentials_file(&env["EKS_STS_ENDPOINT"]),
                ),
            ],
        )
    })
}

/// The controller's Entra ID client, as the double knows it (and the user it becomes).
const AKS_CLIENT: &str = "kc-test-aks-client";
const AKS_SECRET: &str = "kc-test-aks-secret";
/// The controller's Google authorized user, as the double knows it.
const GKE_CLIENT: &str = "kc-test-gke-client";

/// An authorized-user credentials file whose token endpoint is the double's; its path.
fn google_credentials_file(endpoint: &str) -> String {
    let path = std::env::temp_dir().join(support::unique_name("gke-credentials.json"));
    let credentials = json!({
        "type": "authorized_user",
        "client_id": GKE_CLIENT,
        "client_secret": "kc-test-gke-secret",
        "refresh_token": "kc-test-gke-refresh",
        "token_uri": format!("{}/token", endpoint.trim_end_matches('/')),
    });
    std::fs::write(&path, credentials.to_string()).expect("write the Google credentials");
    path.display().to_string()
}

/// The server URL and PEM CA certificate of the remote cluster's kubeconfig.
fn remote_server_and_ca() -> (String, String) {
    use base64::Engine;
    let text = std::fs::read_to_string(support::remote_kubeconfig_path()).expect("kubeconfig");
    let config: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    let cluster = &config["clusters"][0]["cluster"];
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().expect("CA"))
        .expect("CA base64");
    (
        cluster["server"].as_str().expect("server").to_owned(),
        String::from_utf8(ca).expect("PEM"),
    )
}

/// Namespace `ns` on the remote cluster, where the users of `ROLE_ARN` and `CONTROLLER_ARN`
/// may do anything (and nothing elsewhere).
async fn remote_namespace_for_eks_users(remote: &kube::Client, ns: &str) {
    remote_namespace_for(remote, ns, &[ROLE_ARN, CONTROLLER_ARN]).await;
}

/// Namespace `ns` on the remote cluster, where `users` may do anything (and nothing
/// elsewhere).
async fn remote_namespace_for(remote: &kube::Client, ns: &str, users: &[&str]) {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    Api::<Namespace>::all(remote.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the remote namespace");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "eks-users", "namespace": ns},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }))
    .expect("role");
    Api::<Role>::namespaced(remote.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("create the remote Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "eks-users", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "eks-users"},
        "subjects": users
            .iter()
            .map(|user| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}))
            .collect::<Vec<_>>(),
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(remote.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create the remote RoleBinding");
}

/// A ConfigMap `name` in `ns` naming the EKS cluster `cluster` with `data` besides.
async fn eks_config_map(client: &kube::Client, ns: &str, name: &str, cluster: &str, data: Value) {
    let mut all = json!({
        "provider": "aws",
        "cluster": format!("arn:aws:eks:us-east-1:{ACCOUNT}:cluster/{cluster}"),
    });
    if let (Some(all), Value::Object(data)) = (all.as_object_mut(), data) {
        all.extend(data);
    }
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "data": all,
    }))
    .expect("config map");
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &config_map)
        .await
        .expect("create the cluster ConfigMap");
}

/// A ServiceAccount `name` in `ns` with `annotations`.
async fn service_account(client: &kube::Client, ns: &str, name: &str, annotations: Value) {
    let account: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
    }))
    .expect("service account");
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .expect("create the ServiceAccount");
}

async fn create(client: &kube::Client, ns: &str, name: &str, config_map: &str) {
    create_labelled_kustomization(
        client,
        ns,
        name,
        "repo",
        json!({"kubeConfig": {"configMapRef": {"name": config_map}}, "path": format!("./{name}")}),
        json!({SHARD_LABEL: SHARD}),
    )
    .await;
}

/// Waits until Ready is `expected` with a message containing `needle`.
async fn wait_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    expected: ConditionStatus,
    needle: &str,
) -> String {
    wait_ready_message_in(client, ns, name, (expected, needle), || {
        cloud_controller().log()
    })
    .await
}

async fn remote_config_map(remote: &kube::Client, ns: &str, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(remote.clone(), ns)
        .get_opt(name)
        .await
        .expect("read the remote cluster")
}

/// No EKS token, presigned URL or signature in `text`.
fn assert_no_credential(text: &str, what: &str) {
    for secret in [
        "k8s-aws-v1.",
        "X-Amz-Signature",
        "X-Amz-Security-Token",
        "kc-test-eks-static-secret",
    ] {
        assert!(!text.contains(secret), "{what} holds '{secret}'");
    }
}

#[tokio::test]
async fn an_eks_cluster_is_reached_with_a_presigned_sts_token_the_remote_accepts() {
    cloud_controller();
    let client = support::client().await;
    let remote = support::remote_client().await;
    let local = TestNamespace::new(&client, "eks").await;
    let ns = local.name();
    remote_namespace_for_eks_users(&remote, ns).await;
    let (server, ca) = remote_server_and_ca();
    let cluster = eks_env()["EKS_CLUSTER_NAME"].clone();
    service_account(
        &client,
        ns,
        "deployer",
        json!({"eks.amazonaws.com/role-arn": ROLE_ARN}),
    )
    .await;
    // Object identity; the endpoint and CA from DescribeCluster.
    eks_config_map(
        &client,
        ns,
        "eks",
        &cluster,
        json!({"serviceAccountName": "deployer"}),
    )
    .await;
    // The controller's identity; the address and CA of the ConfigMap.
    eks_config_map(
        &client,
        ns,
        "eks-controller",
        &cluster,
        json!({"address": server, "ca.crt": ca}),
    )
    .await;
    // A token signed for another cluster's name.
    eks_config_map(
        &client,
        ns,
        "eks-other",
        "other-cluster",
        json!({"address": server, "ca.crt": ca}),
    )
    .await;
    create_git_source(&client, ns, "repo").await;
    git_source::publish(
        &client,
        ns,
        "repo",
        1,
        &[
            ("object/a.yaml", config_map(ns, "a", "1")),
            ("controller/b.yaml", config_map(ns, "b", "1")),
            ("other/c.yaml", config_map(ns, "c", "1")),
        ],
    )
    .await;
    create(&client, ns, "object", "eks").await;
    create(&client, ns, "controller", "eks-controller").await;
    create(&client, ns, "other", "eks-other").await;
    let revision = published_revision(ns, "repo", 1);
    wait_ready(&client, ns, "object", ConditionStatus::True, &revision).await;
    wait_ready(&client, ns, "controller", ConditionStatus::True, &revision).await;
    assert!(
        remote_config_map(&remote, ns, "a").await.is_some(),
        "a on the remote cluster"
    );
    assert!(
        remote_config_map(&remote, ns, "b").await.is_some(),
        "b on the remote cluster"
    );
    let log = authenticator_log();
    assert!(log.contains(&format!("authenticated {ROLE_ARN}")), "{log}");
    assert!(
        log.contains(&format!("authenticated {CONTROLLER_ARN}")),
        "{log}"
    );
    // The role's session came through the key services' token cache, counted as Flux counts
    // a remote cluster's credentials.
    let metrics = cloud_controller().metrics();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("gotk_token_cache_events_total")
                && l.contains("operation=\"fetch_kubeconfig\"")
                && l.contains(&format!("namespace=\"{ns}\""))),
        "{metrics}"
    );

    // Signed for `other-cluster`, the signature the double checks (with the remote's own
    // cluster name) does not match: the remote refuses the token and nothing is applied.
    let message = wait_ready(&client, ns, "other", ConditionStatus::False, "Unauthorized").await;
    assert!(
        remote_config_map(&remote, ns, "c").await.is_none(),
        "c not applied"
    );
    assert!(
        authenticator_log().contains("refused: STS answered 403"),
        "{}",
        authenticator_log()
    );
    assert_no_credential(&message, "the Ready message");
    assert_no_credential(&cloud_controller().log(), "the controller log");
    let nothing_local = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .filter(|c| ["a", "b", "c"].contains(&c.metadata.name.as_deref().unwrap_or_default()))
        .count();
    assert_eq!(nothing_local, 0, "nothing lands on the local cluster");
    let _ = Api::<Namespace>::all(remote.clone())
        .delete(ns, &Default::default())
        .await;
}

#[tokio::test]
async fn a_provider_that_cannot_get_a_token_or_find_the_cluster_is_named() {
    cloud_controller();
    let client = support::client().await;
    let local = TestNamespace::new(&client, "eks-bad").await;
    let ns = local.name();
    service_account(&client, ns, "no-role", json!({})).await;
    eks_config_map(
        &client,
        ns,
        "no-role",
        "kc-test-remote",
        json!({"serviceAccountName": "no-role"}),
    )
    .await;
    service_account(
        &client,
        ns,
        "spiffe",
        json!({"credential.auth.fluxcd.io/provider": "spiffe", "eks.amazonaws.com/role-arn": ROLE_ARN}),
    )
    .await;
    eks_config_map(
        &client,
        ns,
        "spiffe",
        "kc-test-remote",
        json!({"serviceAccountName": "spiffe"}),
    )
    .await;
    eks_config_map(&client, ns, "gone", "gone", json!({})).await;
    create_git_source(&client, ns, "repo").await;
    git_source::publish(
        &client,
        ns,
        "repo",
        1,
        &[
            ("no-role/a.yaml", config_map(ns, "a", "1")),
            ("gone/b.yaml", config_map(ns, "b", "1")),
            ("spiffe/c.yaml", config_map(ns, "c", "1")),
        ],
    )
    .await;
    create(&client, ns, "no-role", "no-role").await;
    create(&client, ns, "gone", "gone").await;
    create(&client, ns, "spiffe", "spiffe").await;
    let message = wait_ready(
        &client,
        ns,
        "no-role",
        ConditionStatus::False,
        "provider 'aws'",
    )
    .await;
    assert!(
        message.contains(&format!("configmap {ns}/no-role"))
            && message.contains(&format!(
                "service account '{ns}/no-role' has no eks.amazonaws.com/role-arn annotation"
            )),
        "{message}"
    );
    let message = wait_ready(
        &client,
        ns,
        "gone",
        ConditionStatus::False,
        "provider 'aws'",
    )
    .await;
    assert!(
        message.contains(&format!("configmap {ns}/gone"))
            && message.contains("failed to describe EKS cluster 'gone'")
            && message.contains("No cluster found for name: gone."),
        "{message}"
    );
    assert_no_credential(&message, "the Ready message");
    wait_ready(
        &client,
        ns,
        "spiffe",
        ConditionStatus::False,
        &format!("service account '{ns}/spiffe' asks for the credential provider 'spiffe'"),
    )
    .await;
}

/// Clusters of the `azure` and `gcp` providers, reached with the controller's own cloud
/// credentials (an Entra ID client secret, a Google authorized user; the double issues both
/// tokens) and the ConfigMap's address and CA: the remote cluster's webhook accepts the
/// access tokens the doubles issued, so the objects land there as `aks:CLIENT` and
/// `gke:CLIENT`. A ConfigMap that needs a cluster lookup and whose cluster is not a cluster
/// ID of its cloud is refused naming the provider and the ConfigMap, and nothing is applied.
#[tokio::test]
async fn aks_and_gke_clusters_are_reached_with_the_clouds_access_tokens() {
    cloud_controller();
    let client = support::client().await;
    let remote = support::remote_client().await;
    let local = TestNamespace::new(&client, "aks-gke").await;
    let ns = local.name();
    let (aks_user, gke_user) = (format!("aks:{AKS_CLIENT}"), format!("gke:{GKE_CLIENT}"));
    remote_namespace_for(&remote, ns, &[&aks_user, &gke_user]).await;
    let (server, ca) = remote_server_and_ca();
    let clusters = [
        (
            "aks",
            "azure",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kc/providers/Microsoft.ContainerService/managedClusters/kc-test",
        ),
        (
            "gke",
            "gcp",
            "projects/kc/locations/europe-west1/clusters/kc-test",
        ),
        ("gke-bad", "gcp", "kc-test"),
    ];
    for (name, provider, cluster) in clusters {
        let mut data = json!({"provider": provider, "cluster": cluster});
        // Without the address and CA the cluster is looked up, so its ID must be one.
        if name != "gke-bad" {
            data["address"] = server.clone().into();
            data["ca.crt"] = ca.clone().into();
        }
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "data": data,
        }))
        .expect("config map");
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &config_map)
            .await
            .expect("create the cluster ConfigMap");
    }
    create_git_source(&client, ns, "repo").await;
    git_source::publish(
        &client,
        ns,
        "repo",
        1,
        &[
            ("aks/a.yaml", config_map(ns, "from-aks", "1")),
            ("gke/b.yaml", config_map(ns, "from-gke", "1")),
            ("gke-bad/c.yaml", config_map(ns, "from-bad", "1")),
        ],
    )
    .await;
    for name in ["aks", "gke", "gke-bad"] {
        create(&client, ns, name, name).await;
    }
    let revision = published_revision(ns, "repo", 1);
    for (name, object) in [("aks", "from-aks"), ("gke", "from-gke")] {
        let message = wait_ready(&client, ns, name, ConditionStatus::True, &revision).await;
        assert_no_credential(&message, "the Ready message");
        assert!(
            remote_config_map(&remote, ns, object).await.is_some(),
            "{object} on the remote cluster"
        );
    }
    let log = authenticator_log();
    for user in [&aks_user, &gke_user] {
        assert!(log.contains(&format!("authenticated {user}")), "{log}");
    }
    let message = wait_ready(
        &client,
        ns,
        "gke-bad",
        ConditionStatus::False,
        "provider 'gcp'",
    )
    .await;
    assert!(
        message.contains(&format!("configmap {ns}/gke-bad")) && message.contains("kc-test"),
        "{message}"
    );
    assert!(
        remote_config_map(&remote, ns, "from-bad").await.is_none(),
        "nothing applied from the refused ConfigMap"
    );
    let controller_log = cloud_controller().log();
    for secret in [AKS_SECRET, "kc-test-gke-secret", "kc-test-gke-refresh"] {
        assert!(!controller_log.contains(secret), "the log holds '{secret}'");
    }
}
