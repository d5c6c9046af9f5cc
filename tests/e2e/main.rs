//! End-to-end tests: the controller binary runs as it would in a cluster, against the real
//! local control plane, with sources served by a small HTTP artifact server.

mod apply;
#[allow(dead_code)]
#[path = "../support/artifacts.rs"]
mod artifacts;
mod config_watch;
mod dependencies;
mod diff;
mod events;
mod flux_cli;
mod flux_parity;
mod health;
mod hostile;
mod keyservices;
mod normalization;
mod progress;
mod remote_bases;
mod sharding;
mod source_controller;
#[path = "../support/mod.rs"]
mod support;
mod tenancy;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use artifacts::{create_git_repository, publish_artifact, raw_tarball, serve, tarball};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kustomize_controller::api::{ConditionStatus, Kustomization};
use serde_json::{Value, json};
use support::{TestNamespace, wait_for};

const WAIT: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------------------
// The controller process, shared by every test of this binary.

struct ControllerProcess {
    _child: Child,
    temp_root: PathBuf,
    /// Where the controller serves `/metrics` on 127.0.0.1.
    metrics_port: u16,
}

/// Label that shards Kustomizations between the two controllers the tests run, the way
/// Flux shards with `--watch-label-selector`.
const SHARD_LABEL: &str = "kc-test/shard";

/// Label with this test process's run ID on every Kustomization it creates. The controllers
/// of a run watch only their run's objects, so Kustomizations left on a reused control plane
/// by earlier (interrupted) runs do not compete for their workers.
const RUN_LABEL: &str = "kc-test/run";

fn run_id() -> &'static str {
    static RUN_ID: OnceLock<String> = OnceLock::new();
    RUN_ID.get_or_init(|| support::unique_name("run"))
}

/// The controller most tests use: every Kustomization of this run without the shard label.
fn controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let selector = format!(
            "--watch-label-selector={RUN_LABEL}={},!{SHARD_LABEL}",
            run_id()
        );
        start_controller("main", &[&selector])
    })
}

/// A second controller for the `strict` shard, which denies cross-namespace references.
fn strict_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| start_shard_controller("strict", "--no-cross-namespace-refs"))
}

/// Starts a controller for the Kustomizations of this run labelled with shard `shard`, with
/// one extra flag.
fn start_shard_controller(shard: &str, flag: &str) -> ControllerProcess {
    let selector = format!(
        "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={shard}",
        run_id()
    );
    start_controller(shard, &[&selector, flag])
}

/// Starts the controller binary. It runs under a shell that kills it when this test
/// process exits (its stdin closes), so no controller outlives the tests.
fn start_controller(name: &str, args: &[&str]) -> ControllerProcess {
    start_controller_binary(
        name,
        std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
        args,
    )
}

/// Starts `binary` (ours, or Flux's for the parity tests, which take the same flags) the way
/// [`start_controller`] does.
fn start_controller_binary(
    name: &str,
    binary: &std::path::Path,
    args: &[&str],
) -> ControllerProcess {
    start_controller_binary_with_env(name, binary, args, &[])
}

/// [`start_controller_binary`] with extra environment variables.
fn start_controller_binary_with_env(
    name: &str,
    binary: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> ControllerProcess {
    let kubeconfig = support::kubeconfig_path();
    let temp_root = std::env::temp_dir().join(support::unique_name(&format!("controller-{name}")));
    std::fs::create_dir_all(temp_root.join("tmp")).expect("controller temp dir");
    let log = std::fs::File::create(temp_root.join("controller.log")).expect("controller log");
    let binary = binary.display();
    let args: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port for /metrics");
    let script = format!(
        "'{binary}' --log-encoding=console --metrics-addr=127.0.0.1:{metrics_port} \
         --health-addr=127.0.0.1:0 --concurrent=8 --interval-jitter-percentage=0 {} & \
         pid=$!; read _; kill $pid; wait $pid",
        args.join(" ")
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("KUBECONFIG", &kubeconfig)
        .env("TMPDIR", temp_root.join("tmp"))
        .env("RUST_LOG", "info,kustomize_controller=debug")
        .stdin(Stdio::piped())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start the controller");
    eprintln!(
        "{name} controller log: {}",
        temp_root.join("controller.log").display()
    );
    ControllerProcess {
        _child: child,
        temp_root,
        metrics_port,
    }
}

impl ControllerProcess {
    /// What the controller's `/metrics` endpoint serves now.
    fn metrics(&self) -> String {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port))
            .expect("connect to /metrics");
        write!(stream, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .expect("request /metrics");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read /metrics");
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.contains(" 200 "), "{head}");
        // An HTTP/1.0 request: the body is not chunked and ends with the connection.
        body.to_string()
    }

    /// Everything the controller has logged so far. A log that cannot be read fails the test:
    /// an empty text would pass every check that something is absent from it.
    fn log(&self) -> String {
        let path = self.temp_root.join("controller.log");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading the controller log {}: {e}", path.display()))
    }
}

fn controller_log() -> String {
    controller().log()
}

// ---------------------------------------------------------------------------------------
// Objects.

async fn create_kustomization(
    client: &kube::Client,
    ns: &str,
    name: &str,
    source: &str,
    extra: Value,
) {
    create_labelled_kustomization(client, ns, name, source, extra, json!({})).await;
}

async fn create_labelled_kustomization(
    client: &kube::Client,
    ns: &str,
    name: &str,
    source: &str,
    extra: Value,
    labels: Value,
) {
    let api: Api<Kustomization> = Api::namespaced(client.clone(), ns);
    let mut spec = json!({
        "interval": "10m",
        "retryInterval": "2s",
        "prune": true,
        "path": "./deploy",
        "sourceRef": {"kind": "GitRepository", "name": source},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    let ks: Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": ns, "labels": run_labels(labels)},
        "spec": spec,
    }))
    .expect("kustomization");
    api.create(&PostParams::default(), &ks)
        .await
        .expect("create Kustomization");
}

/// `labels` plus this run's label.
fn run_labels(labels: Value) -> Value {
    let mut labels = labels;
    if let Some(map) = labels.as_object_mut() {
        map.insert(RUN_LABEL.to_string(), json!(run_id()));
    }
    labels
}

fn revision(n: u32) -> String {
    format!("main@sha1:{:040x}", n)
}

fn config_map(ns: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: \"{value}\"\n"
    )
}

/// The Ready condition of a Kustomization: (status, reason, message).
async fn ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Option<(ConditionStatus, String, String)> {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()?;
    let conditions = ks.status?.conditions?;
    let ready = conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((ready.status, ready.reason, ready.message))
}

async fn wait_ready_with(
    client: &kube::Client,
    ns: &str,
    name: &str,
    expected: ConditionStatus,
    what: &str,
) -> (String, String) {
    wait_for(WAIT, what, async || match ready(client, ns, name).await {
        Some((status, reason, message)) if status == expected => Ok((reason, message)),
        other => Err(format!(
            "{other:?}\n--- controller log tail ---\n{}",
            tail(&controller_log(), 30)
        )),
    })
    .await
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `text` (console-encoded log output) without its ANSI colour sequences (ESC `[`
/// parameters, ended by a letter).
fn without_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// (reason, note) of the events in `ns`, of the object named `regarding` when given.
async fn event_notes(
    client: &kube::Client,
    ns: &str,
    regarding: Option<&str>,
) -> Vec<(String, String)> {
    use k8s_openapi::api::events::v1::Event;
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            regarding.is_none() || e.regarding.as_ref().and_then(|r| r.name.as_deref()) == regarding
        })
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

async fn config_map_names(client: &kube::Client, ns: &str) -> Vec<String> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list configmaps");
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

async fn inventory(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("get ks");
    ks.status
        .and_then(|s| s.inventory)
        .map(|i| i.entries.into_iter().map(|e| e.id).collect())
        .unwrap_or_default()
}

struct Fixture {
    client: kube::Client,
    ns: TestNamespace,
}

impl Fixture {
    async fn new(test: &str) -> Fixture {
        controller();
        let client = support::client().await;
        let ns = TestNamespace::new(&client, test).await;
        Fixture { client, ns }
    }

    fn ns(&self) -> &str {
        self.ns.name()
    }

    /// A GitRepository `repo` with `files` at revision 1, and a Kustomization `app` of its
    /// `./deploy` that has become Ready.
    async fn app_ready_with(&self, files: &[(&str, &str)]) {
        create_git_repository(&self.client, self.ns(), "repo").await;
        self.publish(1, files).await;
        create_kustomization(&self.client, self.ns(), "app", "repo", json!({})).await;
        wait_ready_with(
            &self.client,
            self.ns(),
            "app",
            ConditionStatus::True,
            "revision 1 applied",
        )
        .await;
    }

    /// A GitRepository `repo` with the given files at `revision(n)`.
    async fn publish<P: AsRef<str>, C: AsRef<str>>(&self, n: u32, files: &[(P, C)]) {
        let (url, digest) = serve(tarball(files));
        publish_artifact(&self.client, self.ns(), "repo", &revision(n), &url, &digest).await;
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

#[tokio::test]
async fn applies_reports_ready_and_prunes_what_left_the_source() {
    let f = Fixture::new("apply-prune").await;
    let ns = f.ns();
    create_git_repository(&f.client, ns, "repo").await;
    let (a, b) = (config_map(ns, "a", "1"), config_map(ns, "b", "2"));
    let svc = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  ports:\n  - port: 80\n"
    );
    f.publish::<&str, &str>(
        1,
        &[
            ("deploy/a.yaml", &a),
            ("deploy/more/b-and-svc.yaml", &format!("{b}---\n{svc}")),
            ("README.md", "x"),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "Ready=True for revision 1",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded");
    assert_eq!(message, format!("Applied revision: {}", revision(1)));

    let cm = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("configmap a");
    let labels = cm.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("kustomize.toolkit.fluxcd.io/name")
            .map(String::as_str),
        Some("app")
    );
    assert_eq!(
        labels
            .get("kustomize.toolkit.fluxcd.io/namespace")
            .map(String::as_str),
        Some(ns)
    );
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"kustomize-controller".to_string()),
        "{managers:?}"
    );

    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    assert_eq!(
        ids,
        [
            format!("{ns}_a__ConfigMap"),
            format!("{ns}_b__ConfigMap"),
            format!("{ns}_web__Service")
        ]
    );

    let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .get("app")
        .await
        .expect("ks");
    let status = ks.status.clone().expect("status");
    assert_eq!(status.last_applied_revision, Some(revision(1)));
    assert_eq!(status.last_attempted_revision, Some(revision(1)));
    assert_eq!(status.observed_generation, ks.metadata.generation);
    assert!(
        ks.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"finalizers.fluxcd.io".to_string())
    );

    let wait = support::kubectl()
        .args([
            "wait",
            "kustomization/app",
            "-n",
            ns,
            "--for=condition=ready",
            "--timeout=60s",
        ])
        .output()
        .expect("run kubectl wait");
    assert!(
        wait.status.success(),
        "kubectl wait failed: {}",
        String::from_utf8_lossy(&wait.stderr)
    );

    // Revision 2 drops b: it is pruned and leaves the inventory.
    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "changed")),
            ("deploy/more/svc.yaml", &svc),
        ],
    )
    .await;
    wait_for(WAIT, "revision 2 applied", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, message))
                if message == format!("Applied revision: {}", revision(2)) =>
            {
                Ok(())
            }
            other => Err(other),
        }
    })
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a"]);
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a");
    assert_eq!(
        a.data.unwrap_or_default().get("value").map(String::as_str),
        Some("changed")
    );
    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    assert_eq!(
        ids,
        [format!("{ns}_a__ConfigMap"), format!("{ns}_web__Service")]
    );
}

#[tokio::test]
async fn digest_mismatch_fails_without_touching_applied_objects() {
    let f = Fixture::new("digest").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    let (url, _) = serve(tarball(&[("deploy/b.yaml", &config_map(ns, "b", "2"))]));
    let wrong = format!("sha256:{}", "0".repeat(64));
    publish_artifact(&f.client, ns, "repo", &revision(2), &url, &wrong).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "Ready=False after digest mismatch",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed");
    assert_eq!(
        message,
        "Source is not ready, artifact digest changed, retrying in 30s"
    );
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "the old object stays, nothing new is applied"
    );
    let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .get("app")
        .await
        .expect("ks");
    let status = ks.status.expect("status");
    assert_eq!(status.last_applied_revision, Some(revision(1)));
    // As with Flux, a revision counts as attempted once its artifact was fetched.
    assert_eq!(status.last_attempted_revision, Some(revision(1)));
}

#[tokio::test]
async fn missing_source_then_created_becomes_ready_by_itself() {
    let f = Fixture::new("late-source").await;
    let ns = f.ns();
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "Ready=False without source",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed");
    assert!(message.contains("not found"), "{message}");

    create_git_repository(&f.client, ns, "repo").await;
    f.publish(1, &[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    let (_, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "Ready=True once the source exists",
    )
    .await;
    assert_eq!(message, format!("Applied revision: {}", revision(1)));
    assert_eq!(config_map_names(&f.client, ns).await, ["a"]);
}

#[tokio::test]
async fn requested_at_annotation_triggers_a_reconcile() {
    let f = Fixture::new("requested-at").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    // Drift: the object is deleted behind the controller's back; only a reconcile brings it back.
    let configmaps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    configmaps
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    let requested = "2026-11-21T10:00:00.000000000Z";
    let patch =
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": requested}}});
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
    wait_for(
        WAIT,
        "lastHandledReconcileAt to record the request",
        async || {
            let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
                .get("app")
                .await
                .map_err(|e| e.to_string())?;
            match ks.status.and_then(|s| s.last_handled_reconcile_at) {
                Some(handled) if handled == requested => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    wait_for(WAIT, "the deleted ConfigMap to be re-applied", async || {
        configmaps.get_opt("a").await.ok().flatten().ok_or(())
    })
    .await;
}

#[tokio::test]
async fn deleting_the_kustomization_prunes_its_objects_and_releases_the_finalizer() {
    let f = Fixture::new("delete").await;
    let ns = f.ns();
    f.app_ready_with(&[
        ("deploy/a.yaml", &config_map(ns, "a", "1")),
        ("deploy/b.yaml", &config_map(ns, "b", "1")),
    ])
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);

    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    api.delete("app", &DeleteParams::default())
        .await
        .expect("delete ks");
    wait_for(WAIT, "the Kustomization to be gone", async || {
        match api.get_opt("app").await {
            Ok(None) => Ok(()),
            other => Err(format!(
                "{:?}",
                other.map(|k| k.map(|k| k.metadata.finalizers))
            )),
        }
    })
    .await;
    wait_for(WAIT, "its ConfigMaps to be deleted", async || {
        let names = config_map_names(&f.client, ns).await;
        if names.is_empty() { Ok(()) } else { Err(names) }
    })
    .await;
}

#[tokio::test]
async fn unsafe_tarballs_are_refused_and_write_nothing_outside_the_root() {
    let f = Fixture::new("unsafe-tar").await;
    let ns = f.ns();
    create_git_repository(&f.client, ns, "repo").await;
    create_kustomization(&f.client, ns, "app", "repo", json!({"path": "./"})).await;
    let marker = support::unique_name("escaped");
    let payload = config_map(ns, "evil", "1");
    let temp_parent = controller().temp_root.clone();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "path traversal",
            raw_tarball(&[(
                &format!("../../{marker}.yaml"),
                tar::EntryType::Regular,
                "",
                &payload,
            )]),
        ),
        (
            "absolute path",
            raw_tarball(&[(
                &format!("/tmp/{marker}.yaml"),
                tar::EntryType::Regular,
                "",
                &payload,
            )]),
        ),
        (
            "escaping symlink",
            raw_tarball(&[
                ("link", tar::EntryType::Symlink, "../..", ""),
                (
                    &format!("link/{marker}.yaml"),
                    tar::EntryType::Regular,
                    "",
                    &payload,
                ),
            ]),
        ),
    ];
    for (n, (case, tarball)) in cases.into_iter().enumerate() {
        let (url, digest) = serve(tarball);
        let rev = revision(100 + n as u32);
        publish_artifact(&f.client, ns, "repo", &rev, &url, &digest).await;
        // The artifact never extracts, so it is never attempted: the message names its URL.
        let (reason, message) =
            wait_for(WAIT, &format!("{case}: Ready=False"), async || match ready(
                &f.client, ns, "app",
            )
            .await
            {
                Some((ConditionStatus::False, reason, message)) if message.contains(&url) => {
                    Ok((reason, message))
                }
                other => Err(format!("{other:?}")),
            })
            .await;
        assert_eq!(reason, "ArtifactFailed", "{case}");
        assert!(message.contains("unsafe entry"), "{case}: {message}");
        assert!(
            config_map_names(&f.client, ns).await.is_empty(),
            "{case}: nothing may be applied"
        );
        for place in [
            temp_parent.clone(),
            temp_parent.join("tmp"),
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
        ] {
            assert!(
                !place.join(format!("{marker}.yaml")).exists(),
                "{case}: a file escaped into {}",
                place.display()
            );
        }
    }
}

#[tokio::test]
async fn sources_in_other_namespaces_are_followed_unless_denied() {
    let f = Fixture::new("cross-ns").await;
    strict_controller();
    let sources = TestNamespace::new(&f.client, "cross-ns-sources").await;
    create_git_repository(&f.client, sources.name(), "repo").await;
    let ns = f.ns();
    let (url, digest) = serve(tarball(&[("deploy/a.yaml", &config_map(ns, "a", "1"))]));
    publish_artifact(
        &f.client,
        sources.name(),
        "repo",
        &revision(1),
        &url,
        &digest,
    )
    .await;
    let source_ref = json!({"sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": sources.name()}});

    create_kustomization(&f.client, ns, "allowed", "repo", source_ref.clone()).await;
    wait_ready_with(
        &f.client,
        ns,
        "allowed",
        ConditionStatus::True,
        "cross-namespace source applied",
    )
    .await;

    create_labelled_kustomization(
        &f.client,
        ns,
        "denied",
        "repo",
        source_ref,
        json!({SHARD_LABEL: "strict"}),
    )
    .await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "denied",
        ConditionStatus::False,
        "AccessDenied from the strict controller",
    )
    .await;
    assert_eq!(reason, "AccessDenied");
    assert!(
        message.contains("cross-namespace references have been blocked"),
        "{message}"
    );

    // A new revision in the other namespace reaches the allowed Kustomization by itself.
    let (url, digest) = serve(tarball(&[("deploy/a.yaml", &config_map(ns, "a", "2"))]));
    publish_artifact(
        &f.client,
        sources.name(),
        "repo",
        &revision(2),
        &url,
        &digest,
    )
    .await;
    wait_for(
        WAIT,
        "revision 2 applied across namespaces",
        async || match ready(&f.client, ns, "allowed").await {
            Some((ConditionStatus::True, _, message)) if message.ends_with(&revision(2)) => Ok(()),
            other => Err(other),
        },
    )
    .await;
}

#[tokio::test]
async fn change_sets_and_failures_are_recorded_as_events() {
    let f = Fixture::new("events").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    let notes = async || event_notes(&f.client, ns, Some("app")).await;
    wait_for(WAIT, "the change set event", async || {
        let notes = notes().await;
        let change_set = format!("ConfigMap/{ns}/a created");
        if notes
            .iter()
            .any(|(reason, note)| reason == "Progressing" && note == &change_set)
            && notes.iter().any(|(_, note)| {
                note.starts_with("Reconciliation finished in")
                    && note.ends_with("next run in 10m0s")
            })
        {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;

    f.publish(
        2,
        &[(
            "deploy/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [broken\n",
        )],
    )
    .await;
    let (reason, message) =
        wait_ready_with(&f.client, ns, "app", ConditionStatus::False, "BuildFailed").await;
    assert_eq!(reason, "BuildFailed");
    assert!(
        message.starts_with("failed to decode Kubernetes YAML from deploy/a.yaml"),
        "{message}"
    );
    wait_for(WAIT, "the failure event", async || {
        let notes = notes().await;
        if notes.iter().any(|(reason, note)| {
            reason == "BuildFailed"
                && note.starts_with("failed to decode Kubernetes YAML from deploy/a.yaml")
        }) {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a is untouched");
    assert_eq!(
        a.data.unwrap_or_default().get("value").map(String::as_str),
        Some("1")
    );
}

#[tokio::test]
async fn suspended_kustomizations_are_left_alone_until_resumed() {
    let f = Fixture::new("suspend").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    let suspend = |value: bool| json!({"spec": {"suspend": value}});
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&suspend(true)),
    )
    .await
    .expect("suspend");
    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "2")),
        ],
    )
    .await;
    // A negative observation needs a window: long enough for an unsuspended controller to
    // apply (it does so in well under a second here), short enough to keep the test quick.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "a suspended Kustomization applies nothing"
    );
    let status = api.get("app").await.expect("ks").status.expect("status");
    assert_eq!(status.last_attempted_revision, Some(revision(1)));

    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&suspend(false)),
    )
    .await
    .expect("resume");
    wait_for(
        WAIT,
        "revision 2 applied after resuming",
        async || match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, message)) if message.ends_with(&revision(2)) => Ok(()),
            other => Err(other),
        },
    )
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);
}

#[tokio::test]
async fn custom_resources_are_applied_after_their_definitions() {
    let f = Fixture::new("crds").await;
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\n\
         spec:\n  group: {group}\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n\
         \x20 scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n\
         \x20   schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
    );
    let extra_ns = format!("{ns}-extra");
    let widget = format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: {ns}\nspec:\n  size: 3\n"
    );
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {extra_ns}\n");
    create_git_repository(&f.client, ns, "repo").await;
    // Files are read in path order, so the custom resource comes before its definition.
    f.publish(
        1,
        &[
            ("deploy/a-widget.yaml", &widget),
            ("deploy/b-cm.yaml", &config_map(&extra_ns, "in-new-ns", "1")),
            ("deploy/c-crd.yaml", &crd),
            ("deploy/d-ns.yaml", &namespace),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "CRD, namespace and custom resource applied",
    )
    .await;
    assert_eq!(
        inventory(&f.client, ns, "app").await,
        [
            format!("_widgets.{group}_apiextensions.k8s.io_CustomResourceDefinition"),
            format!("_{extra_ns}__Namespace"),
            format!("{extra_ns}_in-new-ns__ConfigMap"),
            format!("{ns}_w_{group}_Widget"),
        ],
        "inventory in apply order"
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        f.client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&group, "v1", "Widget"),
            "widgets",
        ),
    );
    let w = widgets.get("w").await.expect("widget");
    assert_eq!(w.data["spec"]["size"], json!(3));

    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(WAIT, "the CRD to be pruned", async || {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
        match crds.get_opt(&format!("widgets.{group}")).await {
            Ok(None) => Ok(()),
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.map(|c| c.metadata.name)))),
        }
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_condition_and_nothing_applied() {
    let f = Fixture::new("bad-input").await;
    let ns = f.ns();
    create_git_repository(&f.client, ns, "repo").await;
    f.publish::<&str, &str>(
        1,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            (
                "overlay/kustomization.yaml",
                "resources: [base]\nnamePrefx: dropped-as-flux-drops-it-\n",
            ),
            // A base is read by kustomize itself, strictly: the typo is refused there.
            (
                "overlay/base/kustomization.yaml",
                "resources: [cm.yaml]\nnamePrefx: x-\n",
            ),
            ("overlay/base/cm.yaml", &config_map(ns, "o", "1")),
            ("dup/one.yaml", &config_map(ns, "d", "1")),
            ("dup/two.yaml", &config_map(ns, "d", "2")),
        ],
    )
    .await;
    let cases = [
        (
            "escape",
            json!({"path": "../../etc"}),
            "ArtifactFailed",
            "escapes the artifact root",
        ),
        (
            "missing",
            json!({"path": "./nope"}),
            "ArtifactFailed",
            "kustomization path not found: stat ",
        ),
        (
            "overlay",
            json!({"path": "./overlay"}),
            "BuildFailed",
            "overlay/base/kustomization.yaml: invalid Kustomization: unknown field `namePrefx`",
        ),
        (
            "duplicate",
            json!({"path": "./dup"}),
            "BuildFailed",
            "already registered id: ConfigMap",
        ),
        (
            "post-build",
            json!({"postBuild": {"substitute": {"1x": "y"}}}),
            "BuildFailed",
            "'1x' var name is invalid",
        ),
        (
            "decryption",
            json!({"decryption": {"provider": "sops", "secretRef": {"name": "no-such-keys"}}}),
            "BuildFailed",
            "secrets \"no-such-keys\" not found",
        ),
        (
            "patches",
            json!({"patches": [{"patch": "x"}]}),
            "BuildFailed",
            "inline patch",
        ),
        (
            "kubeconfig",
            json!({"kubeConfig": {"secretRef": {"name": "remote"}}}),
            "ReconciliationFailed",
            "unable to read KubeConfig secret",
        ),
        (
            "cel-syntax",
            json!({"wait": true, "healthCheckExprs": [
                {"apiVersion": "example.com/v1", "kind": "Widget", "current": "status.phase =="}
            ]}),
            "InvalidCELExpression",
            "Reconciliation failed terminally due to configuration error: \
             failed to create custom status evaluator for healthchecks[0]: \
             failed to parse the expression Current: \
             failed to parse the CEL expression 'status.phase =='",
        ),
    ];
    for (name, extra, _, _) in &cases {
        create_kustomization(&f.client, ns, name, "repo", extra.clone()).await;
    }
    for (name, _, expected_reason, expected_message) in &cases {
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(&reason, expected_reason, "{name}: {message}");
        assert!(message.contains(expected_message), "{name}: {message}");
    }
    // Every case stopped before the apply stage.
    assert!(config_map_names(&f.client, ns).await.is_empty());
    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    let cel = api
        .get("cel-syntax")
        .await
        .expect("ks")
        .status
        .expect("status");
    let stalled = cel
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Stalled")
        .expect("an invalid expression stalls the Kustomization");
    assert_eq!(stalled.reason, "InvalidCELExpression");
    for (name, ..) in &cases {
        let status = api.get(name).await.expect("ks").status.expect("status");
        assert!(
            status.inventory.is_none(),
            "{name}: no inventory without an apply"
        );
        assert!(status.last_applied_revision.is_none(), "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// A kustomize overlay end to end: what the controller applies must equal what the
// reference `kustomize build` makes of the same tree with the Kustomization's fields laid
// over it the way Flux lays them.

/// The source tree of the kustomize tests, published whole as the artifact.
const KUSTOMIZE_FIXTURE: &str = "tests/fixtures/e2e-kustomize";

/// The overlay `spec.path` points at in the happy-path test.
const PROD_OVERLAY: &str = "overlays/prod";

/// Env var naming the reference kustomize binary (set by tests/run.sh).
const REFERENCE_KUSTOMIZE_ENV: &str = "KC_DIFF_KUSTOMIZE";

/// The build fields of the Kustomization under test: a target namespace, an image override
/// of an image the overlay does not touch, and inline patches with targets (one JSON 6902
/// patch selecting by name, one strategic-merge patch selecting by label).
fn overlay_build_fields(ns: &str) -> Value {
    json!({
        "path": format!("./{PROD_OVERLAY}"),
        "targetNamespace": ns,
        "images": [
            {"name": "busybox", "newName": "registry.example.com/tools/busybox", "newTag": "1.37"}
        ],
        "patches": [
            {
                "patch": "- op: add\n  path: /spec/template/metadata/labels/tier\n  value: frontend\n",
                "target": {"kind": "Deployment", "name": "web"}
            },
            {
                "patch": "apiVersion: v1\nkind: Service\nmetadata:\n  name: any\n  annotations:\n    example.com/exposed: \"true\"\n",
                "target": {"kind": "Service", "labelSelector": "app.kubernetes.io/name=web"}
            }
        ]
    })
}

#[tokio::test]
async fn kustomize_overlay_is_applied_exactly_as_kustomize_builds_it() {
    let f = Fixture::new("kustomize-overlay").await;
    let ns = f.ns();
    let fields = overlay_build_fields(ns);
    let expected = reference_build(PROD_OVERLAY, &fields)
        .unwrap_or_else(|e| panic!("the reference kustomize must build the fixture: {e}"));
    assert_reference_used_every_feature(&expected, ns);

    create_git_repository(&f.client, ns, "repo").await;
    let files = kustomize_fixture_files();
    f.publish(1, &files).await;
    create_kustomization(&f.client, ns, "app", "repo", fields).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "the overlay to be applied",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    assert_eq!(message, format!("Applied revision: {}", revision(1)));

    // Every object kustomize builds is on the cluster, field for field.
    let mut mismatches = Vec::new();
    for object in &expected {
        let id = object_display(object);
        match live_object(&f.client, object).await {
            Some(live) => mismatches.extend(
                compare_with_live(object, &live)
                    .into_iter()
                    .map(|m| format!("{id}: {m}")),
            ),
            None => mismatches.push(format!("{id}: not found on the cluster")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "applied objects differ from `kustomize build`:\n{}",
        mismatches.join("\n")
    );

    // The inventory lists exactly the built objects.
    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    let mut expected_ids: Vec<String> = expected.iter().map(inventory_id).collect();
    expected_ids.sort();
    assert_eq!(ids, expected_ids);

    // The Deployment refers to the generated ConfigMap by its hashed name, which exists.
    let config_map_name = expected
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .and_then(|o| o["metadata"]["name"].as_str())
        .expect("the build has a ConfigMap")
        .to_string();
    assert_hashed_name(&config_map_name, "prod-web-config-");
    assert_eq!(
        config_map_names(&f.client, ns).await,
        std::slice::from_ref(&config_map_name)
    );
    let deployment =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(f.client.clone(), ns)
            .get("prod-web")
            .await
            .expect("the prefixed Deployment");
    let pod = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod template spec");
    let env_from: Vec<String> = pod
        .containers
        .iter()
        .flat_map(|c| c.env_from.iter().flatten())
        .filter_map(|e| e.config_map_ref.as_ref().map(|r| r.name.clone()))
        .collect();
    assert_eq!(
        env_from,
        std::slice::from_ref(&config_map_name),
        "envFrom.configMapRef"
    );
    let volumes: Vec<String> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
        .collect();
    assert_eq!(volumes, [config_map_name], "volumes[].configMap");
}

#[tokio::test]
async fn broken_overlays_fail_the_build_and_apply_nothing() {
    let f = Fixture::new("kustomize-broken").await;
    let ns = f.ns();
    // (Kustomization, overlay, what the message must name)
    let cases: [(&str, &str, &[&str]); 2] = [
        (
            "broken-patch",
            "overlays/broken-patch",
            &["no-such-deployment", "broken-patch"],
        ),
        (
            "broken-generator",
            "overlays/broken-generator",
            &["settings-that-do-not-exist.properties"],
        ),
    ];
    for (name, overlay, _) in &cases {
        let fields = json!({"path": format!("./{overlay}"), "targetNamespace": ns});
        assert!(
            reference_build(overlay, &fields).is_err(),
            "{name}: the reference kustomize must refuse {overlay} too"
        );
    }

    create_git_repository(&f.client, ns, "repo").await;
    let files = kustomize_fixture_files();
    f.publish(1, &files).await;
    for (name, overlay, _) in &cases {
        let fields = json!({"path": format!("./{overlay}"), "targetNamespace": ns});
        create_kustomization(&f.client, ns, name, "repo", fields).await;
    }
    for (name, _, named) in &cases {
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(reason, "BuildFailed", "{name}: {message}");
        for word in named.iter() {
            assert!(
                message.contains(word),
                "{name}: the message must name {word:?}: {message}"
            );
        }
    }

    // Nothing from either Kustomization reached the cluster.
    assert!(config_map_names(&f.client, ns).await.is_empty());
    let deployments =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(f.client.clone(), ns)
            .list(&Default::default())
            .await
            .expect("list deployments");
    assert!(deployments.items.is_empty(), "no Deployment may be applied");
    let services = Api::<k8s_openapi::api::core::v1::Service>::namespaced(f.client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list services");
    assert!(services.items.is_empty(), "no Service may be applied");
    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    for (name, ..) in &cases {
        let status = api.get(name).await.expect("ks").status.expect("status");
        assert!(status.inventory.is_none(), "{name}: no inventory");
        assert!(status.last_applied_revision.is_none(), "{name}");
        assert_eq!(status.last_attempted_revision, Some(revision(1)), "{name}");
    }
}

/// Every file of the kustomize fixture tree as (path relative to the tree, content), in
/// path order.
fn kustomize_fixture_files() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                let content = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                out.push((relative.to_string_lossy().into_owned(), content));
            }
        }
    }
    let root = support::repo_root().join(KUSTOMIZE_FIXTURE);
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    assert!(!files.is_empty(), "{} is empty", root.display());
    files
}

/// The reference kustomize binary: `KC_DIFF_KUSTOMIZE`, else the one
/// `tests/kustomize/install-kustomize.sh` builds (once per machine) and prints.
fn reference_kustomize() -> &'static std::path::Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        support::reference_tool(
            REFERENCE_KUSTOMIZE_ENV,
            "tests/kustomize/install-kustomize.sh",
        )
    })
}

/// Lays a Kustomization's build fields over a kustomization file the way Flux's generator
/// does: `targetNamespace` becomes `namespace`; each image replaces the entry of the same
/// name or is appended; each patch is appended with its target.
fn flux_overlay(kustomization: &mut Value, fields: &Value) {
    let file = kustomization
        .as_object_mut()
        .expect("a kustomization file is a mapping");
    if let Some(ns) = fields["targetNamespace"].as_str() {
        file.insert("namespace".into(), json!(ns));
    }
    for image in fields["images"].as_array().into_iter().flatten() {
        let images = file
            .entry("images")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("images is a list");
        match images.iter_mut().find(|i| i["name"] == image["name"]) {
            Some(existing) => *existing = image.clone(),
            None => images.push(image.clone()),
        }
    }
    for patch in fields["patches"].as_array().into_iter().flatten() {
        file.entry("patches")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("patches is a list")
            .push(patch.clone());
    }
}

/// `kustomize build --reorder none` of `overlay` in a copy of the fixture tree whose
/// kustomization file carries Flux's overlay of `fields`; the objects, or the error output.
fn reference_build(overlay: &str, fields: &Value) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in kustomize_fixture_files() {
        let target = dir.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::write(target, content).expect("write fixture copy");
    }
    let file = dir.path().join(overlay).join("kustomization.yaml");
    let text = std::fs::read_to_string(&file).expect("overlay kustomization.yaml");
    let mut kustomization: Value = serde_saphyr::from_str(&text).expect("kustomization YAML");
    flux_overlay(&mut kustomization, fields);
    // JSON is YAML: kustomize reads it back as written.
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&kustomization).expect("serialise"),
    )
    .expect("write kustomization.yaml");
    let output = Command::new(reference_kustomize())
        .args(["build", "--reorder", "none"])
        .arg(dir.path().join(overlay))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", reference_kustomize().display()));
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let documents: Vec<Value> = serde_saphyr::from_multiple(&stdout).expect("kustomize output");
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// Guards the fixture: the reference build shows every feature the test is about, so a
/// fixture or overlay that silently stopped exercising one is noticed.
fn assert_reference_used_every_feature(expected: &[Value], ns: &str) {
    let kinds: Vec<&str> = expected.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Deployment", "Service", "ConfigMap"],
        "{expected:#?}"
    );
    for object in expected {
        assert_eq!(
            object["metadata"]["namespace"],
            json!(ns),
            "targetNamespace"
        );
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        assert!(name.starts_with("prod-web"), "namePrefix: {name}");
    }
    let deployment = &expected[0];
    assert_eq!(deployment["spec"]["replicas"], json!(3), "patch file");
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["tier"],
        json!("frontend"),
        "inline patch"
    );
    let containers = &template["spec"]["containers"];
    assert_eq!(
        containers[0]["image"],
        json!("nginx:1.27"),
        "overlay images"
    );
    assert_eq!(
        containers[0]["env"][0],
        json!({"name": "ENVIRONMENT", "value": "production"}),
        "patch file"
    );
    assert_eq!(
        containers[1]["image"],
        json!("registry.example.com/tools/busybox:1.37"),
        "spec.images"
    );
    assert_eq!(
        expected[1]["metadata"]["annotations"]["example.com/exposed"],
        json!("true"),
        "inline patch by label selector"
    );
    assert_eq!(
        expected[2]["data"],
        json!({"GREETING": "hello", "LOG_LEVEL": "warn", "REGION": "eu-west-1"}),
        "configMapGenerator merge"
    );
}

/// Asserts `name` is `prefix` followed by a kustomize content hash.
fn assert_hashed_name(name: &str, prefix: &str) {
    let hash = name.strip_prefix(prefix).unwrap_or("");
    assert!(
        hash.len() == 10 && hash.chars().all(|c| c.is_ascii_alphanumeric()),
        "{name} is not {prefix}<hash>"
    );
}

fn object_display(object: &Value) -> String {
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// (group, version) of an object's apiVersion.
fn group_version(object: &Value) -> (String, String) {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// The inventory entry id of an object: `<namespace>_<name>_<group>_<kind>`.
fn inventory_id(object: &Value) -> String {
    format!(
        "{}_{}_{}_{}",
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or(""),
        group_version(object).0,
        object["kind"].as_str().unwrap_or("")
    )
}

/// The live counterpart of a built object, as JSON.
async fn live_object(client: &kube::Client, object: &Value) -> Option<Value> {
    let (group, version) = group_version(object);
    let kind = object["kind"].as_str().unwrap_or("");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, kind));
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let live = api.get_opt(name).await.expect("get the live object")?;
    Some(serde_json::to_value(live).expect("live object as JSON"))
}

/// Labels and annotations the controller itself puts on what it applies.
const CONTROLLER_METADATA_PREFIX: &str = "kustomize.toolkit.fluxcd.io/";

/// Annotations Kubernetes' own controllers add to live objects (the deployment controller
/// numbers each rollout).
const CLUSTER_ANNOTATIONS: [&str; 1] = ["deployment.kubernetes.io/revision"];

/// Where `live` differs from the built `expected` object. The built object must be
/// contained in the live one (the API server adds defaults and bookkeeping), with lists of
/// equal length; maps the server never defaults (labels, selectors, annotations, ConfigMap
/// data) must be equal, and must not appear on the live object alone; the top-level labels
/// and annotations may only gain the controller's own and those of the cluster's controllers.
fn compare_with_live(expected: &Value, live: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["apiVersion", "kind"] {
        if expected[key] != live[key] {
            out.push(format!("{key}: {} != {}", expected[key], live[key]));
        }
    }
    let (metadata, live_metadata) = (&expected["metadata"], &live["metadata"]);
    for key in ["name", "namespace"] {
        if metadata[key] != live_metadata[key] {
            out.push(format!(
                "metadata.{key}: {} != {}",
                metadata[key], live_metadata[key]
            ));
        }
    }
    for key in ["labels", "annotations"] {
        let mut live_map = live_metadata[key].as_object().cloned().unwrap_or_default();
        live_map.retain(|k, _| {
            !k.starts_with(CONTROLLER_METADATA_PREFIX) && !CLUSTER_ANNOTATIONS.contains(&k.as_str())
        });
        let built = metadata[key].as_object().cloned().unwrap_or_default();
        if built != live_map {
            out.push(format!(
                "metadata.{key}: built {built:?}, live (without the controller's) {live_map:?}"
            ));
        }
    }
    let Some(fields) = expected.as_object() else {
        out.push("the built object is not a mapping".into());
        return out;
    };
    for (key, value) in fields {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
            contained_in(value, &live[key], key, &mut out);
        }
    }
    out
}

/// Map keys whose values the API server never defaults into, compared for equality.
const EXACT_MAPS: [&str; 5] = ["labels", "matchLabels", "selector", "annotations", "data"];

/// Records in `out` where `expected` is not contained in `live` (see `compare_with_live`).
fn contained_in(expected: &Value, live: &Value, path: &str, out: &mut Vec<String>) {
    let last = path.rsplit('.').next().unwrap_or(path);
    match (expected, live) {
        (Value::Object(_), _) if EXACT_MAPS.contains(&last) && expected != live => {
            out.push(format!("{path}: built {expected}, live {live}"));
        }
        (Value::Object(built), Value::Object(actual)) => {
            for (key, value) in built {
                match actual.get(key) {
                    Some(live_value) => {
                        contained_in(value, live_value, &format!("{path}.{key}"), out)
                    }
                    None => out.push(format!("{path}.{key}: missing on the live object")),
                }
            }
            for key in actual.keys() {
                if EXACT_MAPS.contains(&key.as_str()) && !built.contains_key(key) {
                    out.push(format!("{path}.{key}: only on the live object"));
                }
            }
        }
        (Value::Array(built), Value::Array(actual)) if built.len() == actual.len() => {
            for (i, (value, live_value)) in built.iter().zip(actual).enumerate() {
                contained_in(value, live_value, &format!("{path}[{i}]"), out);
            }
        }
        _ if expected != live => out.push(format!("{path}: built {expected}, live {live}")),
        _ => {}
    }
}

/// Labels of a live object, as a JSON map.
async fn labels_of<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => json!(object.meta().labels.clone().unwrap_or_default()),
        other => json!(format!("{:?}", other.map(|o| o.is_some()))),
    }
}

#[tokio::test]
async fn post_build_variables_come_from_config_maps_secrets_and_the_spec() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let f = Fixture::new("post-build").await;
    let ns = f.ns();
    let target_ns = format!("{ns}-vars");
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    let vars: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cluster-vars", "labels": {"reconcile.fluxcd.io/watch": "Enabled"}},
        "data": {"cluster_region": "eu-west-1", "team": "from-config-map"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &vars)
        .await
        .expect("create cluster-vars");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "secret-vars"},
        "stringData": {"team": "platform\n", "tier": "gold"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret-vars");

    let namespace_manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {target_ns}\n  labels:\n    \
         env: ${{cluster_env:=dev}}\n    region: ${{cluster_region}}\n    team: ${{team}}\n    \
         tier: ${{tier}}\n    owner: ${{owner}}\n"
    );
    let raw = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  namespace: {ns}\n  \
         annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  \
         script: echo ${{HOME}}\n"
    );
    create_git_repository(&f.client, ns, "repo").await;
    f.publish(
        1,
        &[
            ("deploy/ns.yaml", &namespace_manifest),
            ("deploy/raw.yaml", &raw),
        ],
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"postBuild": {
            "substitute": {"owner": "sre"},
            "substituteFrom": [
                {"kind": "ConfigMap", "name": "cluster-vars"},
                {"kind": "Secret", "name": "secret-vars"},
                {"kind": "ConfigMap", "name": "absent-vars", "optional": true}
            ]
        }}),
    )
    .await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "revision 1 applied",
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(f.client.clone());
    assert_eq!(
        labels_of(&namespaces, &target_ns).await,
        json!({"env": "dev", "region": "eu-west-1", "team": "platform", "tier": "gold",
               "owner": "sre", "kubernetes.io/metadata.name": target_ns,
               "kustomize.toolkit.fluxcd.io/name": "app", "kustomize.toolkit.fluxcd.io/namespace": ns}),
        "defaults apply, later sources override earlier ones, newlines are stripped"
    );
    let raw_live = config_maps.get("raw").await.expect("raw");
    assert_eq!(
        raw_live
            .data
            .unwrap_or_default()
            .get("script")
            .map(String::as_str),
        Some("echo ${HOME}"),
        "an opted-out object keeps its expressions"
    );

    // A variable with no value in strict mode fails the build and applies nothing.
    let broken = namespace_manifest.replace("owner: ${owner}", "owner: ${missing_owner}");
    f.publish(2, &[("deploy/ns.yaml", &broken), ("deploy/raw.yaml", &raw)])
        .await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "strict failure",
    )
    .await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("missing_owner") && message.contains(&target_ns),
        "{message}"
    );
    assert_eq!(labels_of(&namespaces, &target_ns).await["owner"], "sre");

    // Back to a good revision; then a change to the watched ConfigMap is applied by itself.
    f.publish(
        3,
        &[
            ("deploy/ns.yaml", &namespace_manifest),
            ("deploy/raw.yaml", &raw),
        ],
    )
    .await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "revision 3 applied",
    )
    .await;
    config_maps
        .patch(
            "cluster-vars",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"cluster_region": "us-east-2"}})),
        )
        .await
        .expect("update cluster-vars");
    wait_for(WAIT, "the new region to be applied", async || {
        let labels = labels_of(&namespaces, &target_ns).await;
        if labels["region"] == "us-east-2" {
            Ok(())
        } else {
            Err(labels)
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// SOPS decryption

fn sops_fixture(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sops")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

async fn create_key_secret(client: &kube::Client, ns: &str, name: &str, entries: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Secret;
    let data: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(entry, file)| {
            (
                entry.to_string(),
                json!(sops_fixture(&format!("keys/{file}"))),
            )
        })
        .collect();
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create key Secret");
}

async fn secret_data(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Option<HashMap<String, Vec<u8>>> {
    use k8s_openapi::api::core::v1::Secret;
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get Secret")?;
    Some(
        secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect(),
    )
}

#[tokio::test]
async fn sops_encrypted_manifests_and_generator_files_are_decrypted_before_apply() {
    let f = Fixture::new("sops").await;
    let ns = f.ns();
    create_key_secret(
        &f.client,
        ns,
        "sops-keys",
        &[("age.agekey", "age-1.agekey"), ("rsa.asc", "pgp-rsa.asc")],
    )
    .await;
    create_key_secret(
        &f.client,
        ns,
        "wrong-keys",
        &[("other.agekey", "age-2-and-3.agekey")],
    )
    .await;

    let kustomization = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - secret.yaml
  - docker-secret.yaml
generatorOptions:
  disableNameSuffixHash: true
secretGenerator:
  - name: generated
    files:
      - settings.yaml=pgp-settings.yaml
    envs:
      - app.env
";
    let age_secret = sops_fixture("encrypted/k8s/secret.yaml");
    let docker_secret = sops_fixture("encrypted/k8s/dockerconfigjson-secret.yaml");
    let pgp_file = sops_fixture("encrypted/keys/pgp-rsa.yaml");
    let env_file = sops_fixture("kustomize/app.env");
    let files = [
        ("app/kustomization.yaml", kustomization),
        ("app/secret.yaml", age_secret.as_str()),
        ("app/docker-secret.yaml", docker_secret.as_str()),
        ("app/pgp-settings.yaml", pgp_file.as_str()),
        ("app/app.env", env_file.as_str()),
        ("plain/secret.yaml", age_secret.as_str()),
    ];
    create_git_repository(&f.client, ns, "repo").await;
    f.publish(1, &files).await;
    let decryption = |secret: &str| json!({"provider": "sops", "secretRef": {"name": secret}});
    create_kustomization(
        &f.client,
        ns,
        "decrypted",
        "repo",
        json!({
            "path": "./app", "targetNamespace": ns, "decryption": decryption("sops-keys"),
        }),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "wrong-key",
        "repo",
        json!({
            "path": "./app", "targetNamespace": ns, "namePrefix": "wrong-",
            "decryption": decryption("wrong-keys"),
        }),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "no-decryption",
        "repo",
        json!({
            "path": "./plain", "targetNamespace": ns, "namePrefix": "plain-",
        }),
    )
    .await;

    wait_ready_with(
        &f.client,
        ns,
        "decrypted",
        ConditionStatus::True,
        "decrypted: Ready",
    )
    .await;
    let credentials = secret_data(&f.client, ns, "app-credentials")
        .await
        .expect("app-credentials applied");
    assert_eq!(credentials["password"], b"s3cr3t-Pa55word");
    assert_eq!(credentials["username"], b"app");
    assert!(String::from_utf8_lossy(&credentials["config.yaml"]).contains("tok_0123456789abcdef"));
    let docker = secret_data(&f.client, ns, "registry-credentials").await;
    let docker = docker.expect("the dockerconfigjson Secret is applied");
    assert_eq!(
        docker[".dockerconfigjson"],
        sops_fixture("expected/k8s/dockerconfig.json").into_bytes(),
        "the encrypted data value is decrypted to the JSON sops -d prints"
    );
    let generated = secret_data(&f.client, ns, "generated")
        .await
        .expect("generated Secret");
    assert_eq!(
        generated["settings.yaml"],
        sops_fixture("expected/keys/pgp-rsa.yaml").into_bytes(),
        "the PGP-encrypted generator file is decrypted to what sops -d prints"
    );
    for line in sops_fixture("expected/kustomize/app.env").lines() {
        if let Some((key, value)) = line.split_once('=').filter(|_| !line.starts_with('#')) {
            assert_eq!(generated[key], value.as_bytes(), "env entry {key}");
        }
    }

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "wrong-key",
        ConditionStatus::False,
        "wrong-key: Ready=False",
    )
    .await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("pgp-settings.yaml"),
        "the message names the file: {message}"
    );
    assert!(message.contains("supplied: 2 age identities"), "{message}");
    for secret in ["s3cr3t", "tok_0123", "AGE-SECRET-KEY"] {
        assert!(!message.contains(secret), "{message}");
    }
    for name in [
        "wrong-app-credentials",
        "wrong-generated",
        "wrong-registry-credentials",
    ] {
        assert!(
            secret_data(&f.client, ns, name).await.is_none(),
            "{name} must not be written"
        );
    }

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "no-decryption",
        ConditionStatus::False,
        "no-decryption: Ready=False",
    )
    .await;
    assert_eq!(reason, "ReconciliationFailed", "{message}");
    assert!(
        message.contains(
            "plain-app-credentials is SOPS encrypted, configuring decryption is required"
        ),
        "{message}"
    );
    assert!(
        secret_data(&f.client, ns, "plain-app-credentials")
            .await
            .is_none()
    );
}
