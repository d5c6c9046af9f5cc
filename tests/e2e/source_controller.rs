//! On the real Flux stack: Flux's source-controller (v1.9.6) clones Git repositories that the
//! tests commit to on the control plane's Git server, and this controller applies the artifacts
//! it produces, with source-controller's own revision formats, digests and status updates.

use kube::api::ListParams;

use super::git_source::git_server;

use super::*;

/// Waits until source `name`'s Ready condition is False, and returns its message.
async fn wait_source_failed(api: &Api<DynamicObject>, name: &str, what: &str) -> String {
    wait_for(WAIT, what, async || {
        let source = api.get(name).await.map_err(|e| e.to_string())?;
        let ready = source.data["status"]["conditions"]
            .as_array()
            .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready").cloned());
        match ready {
            Some(c) if c["status"] == "False" => {
                Ok(c["message"].as_str().unwrap_or("").to_string())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// An OCIRepository `name` of `oci://<repository>` at tag `v1`, over plain HTTP.
async fn create_oci_repository(
    client: &kube::Client,
    ns: &str,
    name: &str,
    repository: &str,
) -> Api<DynamicObject> {
    let api = source_api(client, ns, "OCIRepository");
    create_source_object(
        &api,
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"url": format!("oci://{repository}"), "ref": {"tag": "v1"},
                     "insecure": true, "interval": "1h", "timeout": "20s"},
        }),
    )
    .await;
    api
}

/// Waits until source-controller has stored the artifact of `revision` for GitRepository
/// `name`, and returns `status.artifact`.
async fn wait_artifact(client: &kube::Client, ns: &str, name: &str, revision: &str) -> Value {
    let api = git_repository_api(client, ns);
    wait_source_artifact(
        &api,
        name,
        &format!("GitRepository {name} at {revision}"),
        |r| r == revision,
    )
    .await;
    api.get(name).await.expect("GitRepository").data["status"]["artifact"].clone()
}

/// Waits until the Kustomization is Ready with `revision` applied.
async fn wait_applied(client: &kube::Client, ns: &str, name: &str, revision: &str) {
    let api: Api<Kustomization> = Api::namespaced(client.clone(), ns);
    wait_for(
        WAIT,
        &format!("Kustomization {name} applied {revision}"),
        async || {
            let applied = api
                .get(name)
                .await
                .map_err(|e| e.to_string())?
                .status
                .and_then(|status| status.last_applied_revision);
            match ready(client, ns, name).await {
                Some((ConditionStatus::True, _, _)) if applied.as_deref() == Some(revision) => {
                    Ok(())
                }
                other => Err(format!("applied {applied:?}, Ready {other:?}")),
            }
        },
    )
    .await;
}

async fn config_map_names(client: &kube::Client, ns: &str) -> Vec<String> {
    let mut names: Vec<String> = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list ConfigMaps")
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_commit_on_the_branch_is_applied_and_what_it_removed_is_pruned() {
    let f = Fixture::new("sc-branch").await;
    let ns = f.ns();
    let repo = GitRepo::new("branch");
    let first = repo.commit(
        "two config maps",
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    );
    create_source(&f.client, ns, "repo", &repo.url, json!({"branch": "main"})).await;
    let revision = format!("main@sha1:{first}");
    let artifact = wait_artifact(&f.client, ns, "repo", &revision).await;
    assert!(
        artifact["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{artifact}"
    );
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);

    let second = repo.commit(
        "change a, remove b",
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "2")),
            ("deploy/b.yaml", ""),
        ],
    );
    request_fetch(&f.client, ns, "repo").await;
    let revision = format!("main@sha1:{second}");
    wait_artifact(&f.client, ns, "repo", &revision).await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a"], "b is pruned");
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a");
    assert_eq!(a.data.unwrap_or_default()["value"], "2");
}

#[tokio::test]
async fn tags_and_semver_ranges_select_the_revision_source_controller_reports() {
    let f = Fixture::new("sc-tags").await;
    let ns = f.ns();
    let repo = GitRepo::new("tags");
    let v1 = repo.commit(
        "v1.0.0",
        &[("deploy/cm.yaml", &config_map(ns, "release", "1.0.0"))],
    );
    repo.tag("v1.0.0");
    let v11 = repo.commit(
        "v1.1.0",
        &[("deploy/cm.yaml", &config_map(ns, "release", "1.1.0"))],
    );
    repo.tag("v1.1.0");
    repo.commit(
        "v2.0.0",
        &[("deploy/cm.yaml", &config_map(ns, "release", "2.0.0"))],
    );
    repo.tag("v2.0.0");
    create_source(&f.client, ns, "by-tag", &repo.url, json!({"tag": "v1.0.0"})).await;
    create_source(
        &f.client,
        ns,
        "by-semver",
        &repo.url,
        json!({"semver": ">=1.0.0 <2.0.0"}),
    )
    .await;
    let tag_revision = format!("v1.0.0@sha1:{v1}");
    let semver_revision = format!("v1.1.0@sha1:{v11}");
    wait_artifact(&f.client, ns, "by-tag", &tag_revision).await;
    wait_artifact(&f.client, ns, "by-semver", &semver_revision).await;
    create_kustomization(
        &f.client,
        ns,
        "tagged",
        "by-tag",
        json!({"namePrefix": "tagged-"}),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "ranged",
        "by-semver",
        json!({"namePrefix": "ranged-"}),
    )
    .await;
    wait_applied(&f.client, ns, "tagged", &tag_revision).await;
    wait_applied(&f.client, ns, "ranged", &semver_revision).await;
    let value = |name: &'static str| {
        let api = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
        async move { api.get(name).await.expect(name).data.unwrap_or_default()["value"].clone() }
    };
    assert_eq!(value("tagged-release").await, "1.0.0");
    assert_eq!(value("ranged-release").await, "1.1.0");
}

#[tokio::test]
async fn a_repository_source_controller_cannot_fetch_is_reported_and_nothing_is_applied() {
    let f = Fixture::new("sc-missing").await;
    let ns = f.ns();
    let (_, url) = git_server();
    create_source(
        &f.client,
        ns,
        "repo",
        &format!("{url}/{}.git", support::unique_name("absent")),
        json!({"branch": "main"}),
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "the Kustomization waits for an artifact",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed", "{message}");
    assert!(
        message.contains("Source artifact not found"),
        "the message says what is missing: {message}"
    );
    assert!(config_map_names(&f.client, ns).await.is_empty());
}

#[tokio::test]
async fn a_source_in_another_namespace_is_applied_from_when_references_are_allowed() {
    let f = Fixture::new("sc-cross").await;
    let ns = f.ns();
    let source_ns = TestNamespace::new(&f.client, "sc-cross-source").await;
    let repo = GitRepo::new("cross");
    let commit = repo.commit("one", &[("deploy/cm.yaml", &config_map(ns, "shared", "1"))]);
    create_source(
        &f.client,
        source_ns.name(),
        "shared",
        &repo.url,
        json!({"branch": "main"}),
    )
    .await;
    let revision = format!("main@sha1:{commit}");
    wait_artifact(&f.client, source_ns.name(), "shared", &revision).await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "shared",
        json!({"sourceRef": {"kind": "GitRepository", "name": "shared",
                             "namespace": source_ns.name()}}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["shared"]);
}

/// The OCI registry's `host:port`, as tests/flux/source-up.sh wrote it.
fn oci_registry() -> String {
    let path = support::kubeconfig_path()
        .parent()
        .map(|state| state.join("flux/oci-host"))
        .expect("the control plane's state directory");
    std::fs::read_to_string(&path)
        .map(|text| text.trim().to_string())
        .unwrap_or_else(|e| panic!("{}: {e}: up.sh starts the OCI registry", path.display()))
}

#[tokio::test]
async fn an_artifact_pushed_with_flux_push_artifact_is_applied_from_an_oci_repository() {
    let f = Fixture::new("sc-oci").await;
    let ns = f.ns();
    let dir = std::env::temp_dir().join(support::unique_name("oci-push"));
    std::fs::create_dir_all(dir.join("deploy")).expect("push dir");
    std::fs::write(dir.join("deploy/cm.yaml"), config_map(ns, "from-oci", "1")).expect("file");
    let repository = format!("{}/{}", oci_registry(), support::unique_name("app"));
    let output = Command::new(flux_cli::flux_binary())
        .args([
            "push",
            "artifact",
            &format!("oci://{repository}:v1"),
            "--path",
            &dir.display().to_string(),
            "--source",
            "https://github.com/example/app",
            "--revision",
            "main@sha1:0123456789abcdef0123456789abcdef01234567",
            "--output",
            "json",
        ])
        .output()
        .expect("run flux push artifact");
    assert!(
        output.status.success(),
        "flux push artifact: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pushed: Value = serde_json::from_slice(&output.stdout).expect("flux push prints JSON");
    let digest = pushed["digest"].as_str().expect("digest").to_string();

    let api = create_oci_repository(&f.client, ns, "app", &repository).await;
    let revision = format!("v1@{digest}");
    wait_source_artifact(&api, "app", "source-controller pulls the artifact", |r| {
        r == revision
    })
    .await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "app",
        json!({"sourceRef": {"kind": "OCIRepository", "name": "app"}}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["from-oci"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Creates S3 bucket `bucket` on moto (`endpoint`) holding `files`, with boto3 from moto's
/// own virtualenv.
fn fill_bucket(endpoint: &str, bucket: &str, files: &[(&str, String)]) {
    let python = support::reference_tool("KC_MOTO_SERVER", "tests/keyservices/install-moto.sh")
        .with_file_name("python");
    let script = r#"
import json, sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
s3.create_bucket(Bucket=sys.argv[2])
for key, body in json.loads(sys.argv[3]):
    s3.put_object(Bucket=sys.argv[2], Key=key, Body=body.encode())
"#;
    let output = Command::new(python)
        .args(["-c", script, endpoint, bucket, &json!(files).to_string()])
        .output()
        .expect("run boto3");
    assert!(
        output.status.success(),
        "filling the bucket: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_bucket_fetched_by_source_controller_from_s3_is_applied() {
    use k8s_openapi::api::core::v1::Secret;
    let f = Fixture::new("sc-bucket").await;
    let ns = f.ns();
    let moto = &super::support::keyservers::key_servers().moto;
    let bucket = support::unique_name("manifests");
    fill_bucket(
        moto,
        &bucket,
        &[("deploy/cm.yaml", config_map(ns, "from-bucket", "1"))],
    );
    let credentials: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s3-credentials", "namespace": ns},
        "stringData": {"accesskey": "test", "secretkey": "test"},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &credentials)
        .await
        .expect("create the credentials");
    let api = source_api(&f.client, ns, "Bucket");
    create_source_object(
        &api,
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "Bucket",
            "metadata": {"name": "manifests", "namespace": ns},
            "spec": {"provider": "generic", "bucketName": bucket,
                     "endpoint": moto.trim_start_matches("http://"), "insecure": true,
                     "region": "us-east-1", "interval": "1h", "timeout": "20s",
                     "secretRef": {"name": "s3-credentials"}},
        }),
    )
    .await;
    let revision = wait_source_artifact(
        &api,
        "manifests",
        "source-controller fetches the bucket",
        |r| r.starts_with("sha256:"),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "manifests",
        json!({"sourceRef": {"kind": "Bucket", "name": "manifests"}}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["from-bucket"]);
}

/// A Git server of the test's own over `root`, stopped when dropped.
struct OwnGitServer(std::process::Child, String);

impl OwnGitServer {
    fn start(root: &std::path::Path) -> OwnGitServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .expect("a free port");
        let child = Command::new("python3")
            .arg(support::repo_root().join("tests/flux/git-server.py"))
            .arg(root)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a Git server");
        let url = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        OwnGitServer(child, url)
    }
}

impl Drop for OwnGitServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_git_server_that_goes_away_fails_the_source_and_leaves_what_was_applied() {
    let f = Fixture::new("sc-gone").await;
    let ns = f.ns();
    let repo = GitRepo::new("gone");
    let first = repo.commit(
        "two",
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    );
    let (root, shared_url) = git_server();
    let server = OwnGitServer::start(&root);
    let url = repo.url.replace(&shared_url, &server.1);
    create_source(&f.client, ns, "repo", &url, json!({"branch": "main"})).await;
    let revision = format!("main@sha1:{first}");
    wait_artifact(&f.client, ns, "repo", &revision).await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    wait_applied(&f.client, ns, "app", &revision).await;

    drop(server);
    repo.commit("remove b", &[("deploy/b.yaml", "")]);
    request_fetch(&f.client, ns, "repo").await;
    let api = git_repository_api(&f.client, ns);
    let message = wait_source_failed(&api, "repo", "the GitRepository fails to fetch").await;
    assert!(
        message.contains("127.0.0.1"),
        "the failure names the server: {message}"
    );
    let patch = json!({"metadata": {"annotations": {
        "reconcile.fluxcd.io/requestedAt": format!("{:?}", std::time::SystemTime::now())}}});
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("request a reconcile");
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_applied(&f.client, ns, "app", &revision).await;
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a", "b"],
        "nothing is pruned while the source cannot be fetched"
    );
}

#[tokio::test]
async fn source_controller_restarted_mid_fetch_goes_on_and_the_new_commit_is_applied() {
    let f = Fixture::new("sc-restart").await;
    let ns = f.ns();
    let repo = GitRepo::new("restart");
    let first = repo.commit("one", &[("deploy/cm.yaml", &config_map(ns, "cm", "1"))]);
    create_source(&f.client, ns, "repo", &repo.url, json!({"branch": "main"})).await;
    let revision = format!("main@sha1:{first}");
    wait_artifact(&f.client, ns, "repo", &revision).await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    wait_applied(&f.client, ns, "app", &revision).await;

    let state = support::kubeconfig_path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .expect("state directory");
    let pid = std::fs::read_to_string(state.join("flux/source-controller.pid"))
        .expect("source-controller's pid file");
    let second = repo.commit("two", &[("deploy/cm.yaml", &config_map(ns, "cm", "2"))]);
    request_fetch(&f.client, ns, "repo").await;
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let restarted = Command::new("bash")
        .arg(support::repo_root().join("tests/flux/source-up.sh"))
        .arg(&state)
        .stdin(Stdio::null())
        .output()
        .expect("run source-up.sh");
    assert!(
        restarted.status.success(),
        "source-up.sh: {}",
        String::from_utf8_lossy(&restarted.stderr)
    );
    let revision = format!("main@sha1:{second}");
    wait_artifact(&f.client, ns, "repo", &revision).await;
    wait_applied(&f.client, ns, "app", &revision).await;
    let cm = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("cm")
        .await
        .expect("cm");
    assert_eq!(cm.data.unwrap_or_default()["value"], "2");
}

/// (kind/name, resourceVersion) of the objects the swap test applies in `ns`.
async fn object_versions(client: &kube::Client, ns: &str) -> Vec<(String, Option<String>)> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    let params = ListParams::default();
    let mut versions = Vec::new();
    for cm in Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list")
        .items
    {
        if cm.metadata.name.as_deref() != Some("kube-root-ca.crt") {
            versions.push((
                format!("ConfigMap/{}", cm.metadata.name.unwrap_or_default()),
                cm.metadata.resource_version,
            ));
        }
    }
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list")
        .items
    {
        versions.push((
            format!("Deployment/{}", d.metadata.name.unwrap_or_default()),
            d.metadata.resource_version,
        ));
    }
    for secret in Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list")
        .items
    {
        versions.push((
            format!("Secret/{}", secret.metadata.name.unwrap_or_default()),
            secret.metadata.resource_version,
        ));
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list")
        .items
    {
        versions.push((
            format!("Service/{}", s.metadata.name.unwrap_or_default()),
            s.metadata.resource_version,
        ));
    }
    versions.sort();
    versions
}

/// Swapping Flux's kustomize-controller for ours on the real stack: the Kustomization Flux's
/// controller applied from a source-controller artifact moves to ours (as when the image of
/// the Deployment is swapped), and ours re-creates nothing, prunes nothing and writes nothing,
/// a Secret written with stringData and a Service port without protocol included.
#[tokio::test]
async fn swapping_fluxs_controller_for_ours_writes_nothing() {
    let f = Fixture::new("sc-swap").await;
    let ns = f.ns();
    let (flux_shard, ours_shard) = ("swap-flux", "swap-ours");
    let selector = |shard: &str| {
        format!(
            "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={shard}",
            run_id()
        )
    };
    let _flux = start_controller_binary(
        flux_shard,
        flux_parity::flux_binary(),
        &[&selector(flux_shard)],
    );
    let _ours = start_controller(ours_shard, &[&selector(ours_shard)]);
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  \
         selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 8080\n"
    );
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  \
         replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      \
         labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        \
         image: registry.example/web:1\n"
    );
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: {ns}\n\
         stringData:\n  token: not-a-real-token\n"
    );
    let repo = GitRepo::new("swap");
    let commit = repo.commit(
        "app",
        &[
            ("deploy/cm.yaml", &config_map(ns, "settings", "1")),
            ("deploy/service.yaml", &service),
            ("deploy/deployment.yaml", &deployment),
            ("deploy/secret.yaml", &secret),
        ],
    );
    create_source(&f.client, ns, "repo", &repo.url, json!({"branch": "main"})).await;
    let revision = format!("main@sha1:{commit}");
    wait_artifact(&f.client, ns, "repo", &revision).await;
    create_labelled_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"wait": true, "timeout": "1m"}),
        json!({SHARD_LABEL: flux_shard}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &revision).await;
    let api: Api<Kustomization> = Api::namespaced(f.client.clone(), ns);
    let inventory = |ks: Kustomization| ks.status.and_then(|s| s.inventory);
    let flux_inventory = inventory(api.get("app").await.expect("app"));
    let before = object_versions(&f.client, ns).await;
    assert_eq!(before.len(), 4, "{before:?}");

    let token = format!("swap-{}", support::unique_name("token"));
    let patch = json!({"metadata": {
        "labels": {SHARD_LABEL: ours_shard},
        "annotations": {"reconcile.fluxcd.io/requestedAt": token},
    }});
    api.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("hand the Kustomization to ours");
    wait_for(WAIT, "ours handles the Kustomization", async || {
        let status = api
            .get("app")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, _))
                if status.last_handled_reconcile_at.as_deref() == Some(token.as_str()) =>
            {
                Ok(())
            }
            other => Err(format!(
                "{other:?} handled {:?}",
                status.last_handled_reconcile_at
            )),
        }
    })
    .await;
    assert_eq!(
        object_versions(&f.client, ns).await,
        before,
        "ours re-created, pruned or wrote an object Flux applied"
    );
    assert_eq!(
        inventory(api.get("app").await.expect("app")),
        flux_inventory
    );
}

/// Pushes to the OCI registry, as `repository:tag`, an artifact in Flux's format whose content
/// layer is not a tarball (plain HTTP calls of the distribution API).
fn push_broken_artifact(repository: &str, tag: &str) {
    let script = r#"
import hashlib, json, sys, urllib.request
registry, repository, tag = sys.argv[1:4]
def put_blob(data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    started = urllib.request.urlopen(urllib.request.Request(
        f"http://{registry}/v2/{repository}/blobs/uploads/", method="POST"))
    location = started.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    separator = "&" if "?" in location else "?"
    urllib.request.urlopen(urllib.request.Request(
        f"{location}{separator}digest={digest}", data=data, method="PUT",
        headers={"Content-Type": "application/octet-stream"}))
    return digest
layer, config = b"this is not a tarball\n", b"{}"
manifest = {
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.cncf.flux.config.v1+json",
               "digest": put_blob(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.cncf.flux.content.v1.tar+gzip",
                "digest": put_blob(layer), "size": len(layer)}],
    "annotations": {"org.opencontainers.image.source": "https://github.com/example/app",
                    "org.opencontainers.image.revision": "main@sha1:0123456789abcdef0123456789abcdef01234567"},
}
urllib.request.urlopen(urllib.request.Request(
    f"http://{registry}/v2/{repository}/manifests/{tag}", data=json.dumps(manifest).encode(),
    method="PUT", headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))
"#;
    let (registry, name) = repository.split_once('/').expect("registry/name");
    let output = Command::new("python3")
        .args(["-c", script, registry, name, tag])
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "pushing the broken artifact: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn an_oci_artifact_that_is_not_a_tarball_is_refused_and_nothing_is_applied() {
    let f = Fixture::new("sc-oci-broken").await;
    let ns = f.ns();
    let repository = format!("{}/{}", oci_registry(), support::unique_name("broken"));
    push_broken_artifact(&repository, "v1");
    let api = create_oci_repository(&f.client, ns, "app", &repository).await;
    let message = wait_source_failed(&api, "app", "source-controller refuses the artifact").await;
    assert!(
        message.contains("failed to extract layer contents"),
        "source-controller names what failed: {message}"
    );
    create_kustomization(
        &f.client,
        ns,
        "app",
        "app",
        json!({"sourceRef": {"kind": "OCIRepository", "name": "app"}}),
    )
    .await;
    let (reason, ks_message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "the Kustomization has no artifact to apply",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed", "{ks_message}");
    assert!(
        ks_message.contains("Source artifact not found"),
        "{ks_message} (source: {message})"
    );
    assert!(config_map_names(&f.client, ns).await.is_empty());
}

/// The feature gate Kustomizations of ExternalArtifacts need.
const EXTERNAL_ARTIFACT_GATE: &str = "--feature-gates=ExternalArtifact=true";

/// Plays the producer of ExternalArtifact `name` (as source-watcher's ArtifactGenerator
/// does): writes `artifact`, one that source-controller stored, into its status, Ready.
async fn produce_external_artifact(api: &Api<DynamicObject>, name: &str, artifact: &Value) {
    let revision = artifact["revision"].as_str().unwrap_or_default();
    let status = json!({"status": {
        "artifact": artifact,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Succeeded",
            "message": format!("stored artifact for revision '{revision}'"),
            "lastTransitionTime": "2026-11-27T00:00:00Z",
        }],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the ExternalArtifact's status");
}

/// For the controller of `shard`: a Kustomization of an ExternalArtifact applies the artifact
/// its producer publishes, then the next one, pruning what left it. Returns the Ready
/// message after each revision.
async fn external_artifact_revisions_are_applied(shard: &str) -> [String; 2] {
    let f = Fixture::new(shard).await;
    let ns = f.ns();
    let repo = GitRepo::new(shard);
    let first = repo.commit(
        "two config maps",
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    );
    create_source(&f.client, ns, "repo", &repo.url, json!({"branch": "main"})).await;
    let first = format!("main@sha1:{first}");
    let artifact = wait_artifact(&f.client, ns, "repo", &first).await;

    let external = source_api(&f.client, ns, "ExternalArtifact");
    create_source_object(
        &external,
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
            "metadata": {"name": "generated", "namespace": ns},
            "spec": {"sourceRef": {"apiVersion": "source.toolkit.fluxcd.io/v1",
                                   "kind": "GitRepository", "name": "repo"}},
        }),
    )
    .await;
    produce_external_artifact(&external, "generated", &artifact).await;
    create_labelled_kustomization(
        &f.client,
        ns,
        "app",
        "generated",
        json!({"sourceRef": {"kind": "ExternalArtifact", "name": "generated"}}),
        json!({SHARD_LABEL: shard}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &first).await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"], "{shard}");
    let first_message = ready(&f.client, ns, "app").await.map(|r| r.2);

    let second = repo.commit(
        "change a, remove b",
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "2")),
            ("deploy/b.yaml", ""),
        ],
    );
    request_fetch(&f.client, ns, "repo").await;
    let second = format!("main@sha1:{second}");
    let artifact = wait_artifact(&f.client, ns, "repo", &second).await;
    produce_external_artifact(&external, "generated", &artifact).await;
    wait_applied(&f.client, ns, "app", &second).await;
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "{shard}: b is pruned"
    );
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a");
    assert_eq!(a.data.unwrap_or_default()["value"], "2", "{shard}");
    let second_message = ready(&f.client, ns, "app").await.map(|r| r.2);
    [first_message, second_message].map(|m| m.unwrap_or_default())
}

#[tokio::test]
async fn an_external_artifact_is_applied_as_flux_does_and_refused_without_its_gate() {
    let _flux = start_shard_binary(
        "ea-flux",
        flux_parity::flux_binary(),
        &[EXTERNAL_ARTIFACT_GATE],
    );
    let _ours = start_shard_binary(
        "ea-ours",
        std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
        &[EXTERNAL_ARTIFACT_GATE],
    );
    let (flux, ours) = tokio::join!(
        external_artifact_revisions_are_applied("ea-flux"),
        external_artifact_revisions_are_applied("ea-ours"),
    );
    for (flux, ours) in flux.iter().zip(&ours) {
        // The revisions differ (two repositories); the sentence around them does not.
        let shape = |m: &str| m.split("sha1:").next().unwrap_or_default().to_string();
        assert_eq!(shape(flux), shape(ours), "Flux: {flux}\nours: {ours}");
        assert!(ours.starts_with("Applied revision: main@sha1:"), "{ours}");
    }

    // The shared controller runs without the gate: a Kustomization of the same kind is refused
    // by name, and nothing is applied.
    let f = Fixture::new("ea-gated").await;
    let ns = f.ns();
    create_kustomization(
        &f.client,
        ns,
        "gated",
        "generated",
        json!({"sourceRef": {"kind": "ExternalArtifact", "name": "generated"}}),
    )
    .await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "gated",
        ConditionStatus::False,
        "a Kustomization of an ExternalArtifact without the feature gate",
    )
    .await;
    assert_eq!(reason, "AccessDenied", "{message}");
    assert_eq!(
        message,
        format!(
            "can't access 'ExternalArtifact/{ns}/generated', ExternalArtifact feature gate is disabled"
        )
    );
    assert!(config_map_names(&f.client, ns).await.is_empty());
}
