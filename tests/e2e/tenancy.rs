//! Multi-tenancy and remote clusters: objects applied, pruned, health-checked and deleted as
//! the tenant's ServiceAccount (RBAC on the real API server decides), and on the cluster of
//! a kubeconfig Secret while the status stays on the local one.

use k8s_openapi::api::core::v1::Secret;

use super::*;

/// The shard whose controller impersonates `tenant` when a Kustomization names no account.
const DEFAULT_ACCOUNT_SHARD: &str = "default-account";

fn default_account_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_shard_controller(DEFAULT_ACCOUNT_SHARD, "--default-service-account=tenant")
    })
}

/// ServiceAccount `account` in `ns`, with a Role that allows `verbs` on everything in `ns`
/// only (applied again with new verbs when called again).
pub(crate) async fn grant(client: &kube::Client, ns: &str, account: &str, verbs: &[&str]) {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": account, "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": account, "namespace": ns},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": verbs}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": account, "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]}),
    ];
    for object in objects {
        apply_as_test(client, &object).await;
    }
}

/// Server-side applies `object` as the tests' field manager.
async fn apply_as_test(client: &kube::Client, object: &Value) {
    let (group, version) = group_version(object);
    let kind = object["kind"].as_str().unwrap_or_default();
    let plural = match kind {
        "ServiceAccount" => "serviceaccounts",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "Secret" => "secrets",
        other => panic!("no plural known for {other}"),
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &version, kind), plural);
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
        .patch(
            name,
            &PatchParams::apply("kustomize-controller-tests").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {kind}/{ns}/{name}: {e}"));
}

/// Waits until Ready is `expected` with a message containing `needle`.
async fn wait_ready_message(
    client: &kube::Client,
    ns: &str,
    name: &str,
    expected: ConditionStatus,
    needle: &str,
) -> String {
    wait_ready_message_in(client, ns, name, (expected, needle), controller_log).await
}

/// Publishes `files` as publication `n` of the GitRepository `repo`.
async fn publish(client: &kube::Client, ns: &str, n: u32, files: &[(&str, String)]) {
    git_source::publish(client, ns, "repo", n, files).await;
}

/// GitRepository `repo` in `ns` at revision 1: `deploy/a.yaml`, ConfigMap `a`.
async fn source_with_config_map_a(client: &kube::Client, ns: &str) {
    create_git_source(client, ns, "repo").await;
    publish(
        client,
        ns,
        1,
        &[("deploy/a.yaml", config_map(ns, "a", "1"))],
    )
    .await;
}

async fn delete_and_wait_gone(client: &kube::Client, ns: &str, name: &str) {
    let api = Api::<Kustomization>::namespaced(client.clone(), ns);
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete ks");
    wait_for(WAIT, "the Kustomization to be gone", async || {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|k| k.map(|k| k.status)))),
        }
    })
    .await;
}

#[tokio::test]
async fn a_tenant_account_applies_prunes_and_deletes_only_where_its_role_allows() {
    controller();
    let client = support::client().await;
    let tenant = TestNamespace::new(&client, "tenant").await;
    let other = TestNamespace::new(&client, "tenant-other").await;
    let (ns, elsewhere) = (tenant.name(), other.name());
    grant(&client, ns, "tenant", &["*"]).await;
    source_with_config_map_a(&client, ns).await;
    create_kustomization(
        &client,
        ns,
        "apps",
        "repo",
        json!({"serviceAccountName": "tenant", "wait": true, "timeout": "30s"}),
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "apps",
        ConditionStatus::True,
        &published_revision(ns, "repo", 1),
    )
    .await;
    assert_eq!(config_map_names(&client, ns).await, ["a"]);

    // An object outside the tenant's namespace: Forbidden, and nothing of the build applied.
    publish(
        &client,
        ns,
        2,
        &[
            ("deploy/a.yaml", config_map(ns, "a", "2")),
            ("deploy/b.yaml", config_map(ns, "b", "2")),
            ("deploy/c.yaml", config_map(elsewhere, "c", "2")),
        ],
    )
    .await;
    let message =
        wait_ready_message(&client, ns, "apps", ConditionStatus::False, "forbidden").await;
    assert!(
        message.contains(&format!("ConfigMap/{elsewhere}/c"))
            && message.contains(&format!("system:serviceaccount:{ns}:tenant")),
        "{message}"
    );
    assert_eq!(config_map_names(&client, ns).await, ["a"]);
    assert!(config_map_names(&client, elsewhere).await.is_empty());
    let a = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("a")
        .await
        .expect("a");
    assert_eq!(a.data.unwrap_or_default()["value"], "1", "a was applied");

    // Back inside the namespace: applied, and `a` pruned as the tenant.
    publish(
        &client,
        ns,
        3,
        &[("deploy/b.yaml", config_map(ns, "b", "3"))],
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "apps",
        ConditionStatus::True,
        &published_revision(ns, "repo", 3),
    )
    .await;
    assert_eq!(config_map_names(&client, ns).await, ["b"]);

    delete_and_wait_gone(&client, ns, "apps").await;
    assert!(config_map_names(&client, ns).await.is_empty());
}

#[tokio::test]
async fn the_default_account_is_impersonated_for_kustomizations_that_name_none() {
    default_account_controller();
    let client = support::client().await;
    let tenant = TestNamespace::new(&client, "default-account").await;
    let ns = tenant.name();
    // The account may do anything in its namespace but delete.
    let no_delete = ["get", "list", "watch", "create", "update", "patch"];
    grant(&client, ns, "tenant", &no_delete).await;
    source_with_config_map_a(&client, ns).await;
    create_labelled_kustomization(
        &client,
        ns,
        "apps",
        "repo",
        json!({}),
        json!({SHARD_LABEL: DEFAULT_ACCOUNT_SHARD}),
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "apps",
        ConditionStatus::True,
        &published_revision(ns, "repo", 1),
    )
    .await;

    // Pruning `a` needs delete, which the account lacks: the prune is refused by RBAC.
    publish(
        &client,
        ns,
        2,
        &[("deploy/b.yaml", config_map(ns, "b", "2"))],
    )
    .await;
    let message =
        wait_ready_message(&client, ns, "apps", ConditionStatus::False, "forbidden").await;
    assert!(
        message.contains(&format!("system:serviceaccount:{ns}:tenant"))
            && message.contains("delete"),
        "{message}"
    );
    assert_eq!(config_map_names(&client, ns).await, ["a", "b"]);
    assert!(
        inventory(&client, ns, "apps").await.len() == 2,
        "a stays in the inventory until it is pruned"
    );

    grant(&client, ns, "tenant", &["*"]).await;
    wait_ready_message(
        &client,
        ns,
        "apps",
        ConditionStatus::True,
        &published_revision(ns, "repo", 2),
    )
    .await;
    assert_eq!(config_map_names(&client, ns).await, ["b"]);
    delete_and_wait_gone(&client, ns, "apps").await;
    assert!(config_map_names(&client, ns).await.is_empty());
}

/// A Secret `name` in `ns` holding `kubeconfig` under `key`.
pub(crate) async fn kubeconfig_secret(
    client: &kube::Client,
    ns: &str,
    name: &str,
    key: &str,
    kubeconfig: &str,
) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "stringData": {key: kubeconfig},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create kubeconfig secret");
}

async fn remote_config_map(remote: &kube::Client, ns: &str, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(remote.clone(), ns)
        .get_opt(name)
        .await
        .expect("read the remote cluster")
}

#[tokio::test]
async fn a_remote_cluster_gets_the_objects_and_the_local_one_the_status() {
    controller();
    let client = support::client().await;
    let remote = support::remote_client().await;
    let local = TestNamespace::new(&client, "remote").await;
    let ns = local.name();
    let kubeconfig =
        std::fs::read_to_string(support::remote_kubeconfig_path()).expect("remote kubeconfig");
    kubeconfig_secret(&client, ns, "spoke", "value.yaml", &kubeconfig).await;
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n");
    create_git_source(&client, ns, "repo").await;
    publish(
        &client,
        ns,
        1,
        &[
            ("deploy/ns.yaml", namespace.clone()),
            ("deploy/a.yaml", config_map(ns, "a", "1")),
            ("deploy/b.yaml", config_map(ns, "b", "1")),
        ],
    )
    .await;
    create_kustomization(
        &client,
        ns,
        "spoke",
        "repo",
        json!({"kubeConfig": {"secretRef": {"name": "spoke"}}, "wait": true, "timeout": "30s"}),
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "spoke",
        ConditionStatus::True,
        &published_revision(ns, "repo", 1),
    )
    .await;
    assert!(remote_config_map(&remote, ns, "a").await.is_some());
    assert!(remote_config_map(&remote, ns, "b").await.is_some());
    assert!(
        config_map_names(&client, ns).await.is_empty(),
        "nothing lands on the local cluster"
    );

    publish(
        &client,
        ns,
        2,
        &[
            ("deploy/ns.yaml", namespace),
            ("deploy/a.yaml", config_map(ns, "a", "2")),
        ],
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "spoke",
        ConditionStatus::True,
        &published_revision(ns, "repo", 2),
    )
    .await;
    assert!(
        remote_config_map(&remote, ns, "b").await.is_none(),
        "b pruned on the remote cluster"
    );

    // A kubeconfig whose only credential is an exec plugin is refused without the flag.
    let exec = kubeconfig_with_exec_user(&kubeconfig);
    kubeconfig_secret(&client, ns, "exec", "value", &exec).await;
    create_kustomization(
        &client,
        ns,
        "exec",
        "repo",
        json!({"kubeConfig": {"secretRef": {"name": "exec"}}}),
    )
    .await;
    let message = wait_ready_message(
        &client,
        ns,
        "exec",
        ConditionStatus::False,
        "--insecure-kubeconfig-exec",
    )
    .await;
    assert!(
        message.starts_with(&format!("invalid KubeConfig in secret '{ns}/exec'")),
        "{message}"
    );

    // With an account too, requests on the remote cluster impersonate it there: its Role
    // (on the remote cluster) allows `ns` only. The account also exists locally, where Flux
    // looks for it before pruning on deletion.
    grant(&remote, ns, "tenant", &["*"]).await;
    grant(&client, ns, "tenant", &["*"]).await;
    create_kustomization(
        &client,
        ns,
        "spoke-tenant",
        "repo",
        json!({"path": "./tenant", "serviceAccountName": "tenant",
               "kubeConfig": {"secretRef": {"name": "spoke", "key": "value.yaml"}}}),
    )
    .await;
    publish(
        &client,
        ns,
        3,
        &[
            (
                "deploy/ns.yaml",
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
            ),
            ("deploy/a.yaml", config_map(ns, "a", "2")),
            ("tenant/t.yaml", config_map(ns, "t", "3")),
            ("tenant/d.yaml", config_map("default", "d", "3")),
        ],
    )
    .await;
    let message = wait_ready_message(
        &client,
        ns,
        "spoke-tenant",
        ConditionStatus::False,
        "forbidden",
    )
    .await;
    assert!(
        message.contains(&format!("system:serviceaccount:{ns}:tenant"))
            && message.contains("ConfigMap/default/d"),
        "{message}"
    );
    assert!(
        remote_config_map(&remote, ns, "t").await.is_none(),
        "nothing applied"
    );

    delete_and_wait_gone(&client, ns, "spoke").await;
    assert!(
        remote_config_map(&remote, ns, "a").await.is_none(),
        "a deleted on the remote cluster"
    );
}

/// `kubeconfig` with its user's credentials replaced by an exec plugin.
fn kubeconfig_with_exec_user(kubeconfig: &str) -> String {
    let mut config: Value =
        serde_json::to_value(serde_saphyr::from_str::<Value>(kubeconfig).expect("kubeconfig YAML"))
            .expect("kubeconfig");
    for user in config["users"].as_array_mut().expect("users") {
        user["user"] = json!({"exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/false",
        }});
    }
    serde_json::to_string(&config).expect("kubeconfig JSON")
}

/// The server URL and PEM CA certificate of the local test cluster's kubeconfig.
fn local_server_and_ca() -> (String, String) {
    use base64::Engine;
    let text = std::fs::read_to_string(support::kubeconfig_path()).expect("kubeconfig");
    let config: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    let cluster = &config["clusters"][0]["cluster"];
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            cluster["certificate-authority-data"]
                .as_str()
                .expect("CA data"),
        )
        .expect("CA base64");
    (
        cluster["server"].as_str().expect("server").to_string(),
        String::from_utf8(ca).expect("PEM"),
    )
}

#[tokio::test]
async fn a_cluster_named_by_a_config_map_is_reached_with_a_service_account_token() {
    controller();
    let client = support::client().await;
    let tenant = TestNamespace::new(&client, "generic-provider").await;
    let other = TestNamespace::new(&client, "generic-provider-other").await;
    let (ns, elsewhere) = (tenant.name(), other.name());
    // The "remote" cluster is the local one, reached with a token of `spoke` (whose Role
    // allows everything in `ns` only) for the API server's own audience.
    grant(&client, ns, "spoke", &["*"]).await;
    let (server, ca) = local_server_and_ca();
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns);
    for (name, provider) in [("generic", "generic"), ("cloud", "aws")] {
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "data": {
                "provider": provider,
                "address": server,
                "ca.crt": ca,
                "audiences": "https://kubernetes.default.svc.cluster.local",
                "serviceAccountName": "spoke",
            },
        }))
        .expect("config map");
        config_maps
            .create(&PostParams::default(), &config_map)
            .await
            .expect("create cluster config map");
    }
    create_git_source(&client, ns, "repo").await;
    publish(
        &client,
        ns,
        1,
        &[("deploy/a.yaml", config_map(ns, "a", "1"))],
    )
    .await;
    create_kustomization(
        &client,
        ns,
        "generic",
        "repo",
        json!({"kubeConfig": {"configMapRef": {"name": "generic"}}}),
    )
    .await;
    wait_ready_message(
        &client,
        ns,
        "generic",
        ConditionStatus::True,
        &published_revision(ns, "repo", 1),
    )
    .await;
    assert_eq!(
        config_map_names(&client, ns).await,
        ["a", "cloud", "generic"]
    );

    // The token's identity is what RBAC judges: outside `ns`, the apply is forbidden.
    publish(
        &client,
        ns,
        2,
        &[
            ("deploy/a.yaml", config_map(ns, "a", "2")),
            ("deploy/c.yaml", config_map(elsewhere, "c", "2")),
        ],
    )
    .await;
    let message =
        wait_ready_message(&client, ns, "generic", ConditionStatus::False, "forbidden").await;
    assert!(
        message.contains(&format!("system:serviceaccount:{ns}:spoke")),
        "{message}"
    );

    create_kustomization(
        &client,
        ns,
        "cloud",
        "repo",
        json!({"kubeConfig": {"configMapRef": {"name": "cloud"}}}),
    )
    .await;
    // A cloud provider needs the cloud's name of the cluster (for EKS, its ARN).
    let message = wait_ready_message(
        &client,
        ns,
        "cloud",
        ConditionStatus::False,
        "invalid EKS cluster ARN: ''",
    )
    .await;
    assert!(
        message.contains(&format!(
            "provider 'aws' for the cluster of configmap {ns}/cloud"
        )),
        "{message}"
    );
}
