//! End-to-end tests: the controller binary runs as it would in a cluster, against the real
//! local control plane, next to Flux's source-controller, which clones the Git repositories the
//! tests commit to (see `git_source`). This file is the harness (the controller processes, the
//! objects and the Fixture); the tests live in one file per feature.

mod apply;
#[allow(dead_code)]
#[path = "../support/artifacts.rs"]
mod artifacts;
mod build;
mod cloud_clusters;
mod config_watch;
mod dependencies;
mod diff;
mod drift;
mod events;
mod fanout;
mod flux_cli;
mod flux_parity;
mod git_source;
mod health;
mod hostile;
mod keyservices;
mod lifecycle;
mod normalization;
mod post_build;
mod progress;
mod remote_bases;
mod reuse;
mod sharding;
mod sops;
mod source_controller;
mod source_reads;
mod spiffe;
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
use git_source::{
    GitRepo, create_git_source, create_source, create_source_object, git_repository_api, publish,
    published_revision, request_fetch, source_api, wait_source_artifact,
};
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
    start_shard_binary(
        shard,
        std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
        &[flag],
    )
}

/// Starts `binary` (ours, or Flux's, which takes the same flags) for the Kustomizations of
/// this run labelled with shard `shard`, with `extra` flags.
fn start_shard_binary(shard: &str, binary: &std::path::Path, extra: &[&str]) -> ControllerProcess {
    let selector = format!(
        "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={shard}",
        run_id()
    );
    let mut args = vec![selector.as_str()];
    args.extend(extra);
    start_controller_binary(shard, binary, &args)
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

/// Waits until Ready of `name` is `expected` with a message containing `needle`, showing the
/// tail of `log` (a controller's log) while it does not come; the message.
async fn wait_ready_message_in(
    client: &kube::Client,
    ns: &str,
    name: &str,
    (expected, needle): (ConditionStatus, &str),
    log: impl Fn() -> String,
) -> String {
    wait_for(
        WAIT,
        &format!("{name}: Ready={expected:?} with '{needle}'"),
        async || match ready(client, ns, name).await {
            Some((status, _, message)) if status == expected && message.contains(needle) => {
                Ok(message)
            }
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&log(), 20)
            )),
        },
    )
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

/// A test's namespace, with the client that made it. Its sources are made and published to
/// with [`create_source`](Fixture::create_source) and [`publish`](Fixture::publish) (see
/// [`git_source`]).
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

    /// A GitRepository `name` that source-controller reconciles (see [`create_git_source`]).
    async fn create_source(&self, name: &str) {
        create_git_source(&self.client, self.ns(), name).await;
    }

    /// A GitRepository `repo` from source-controller with `files` at revision 1, and a
    /// Kustomization `app` of its `./deploy` that has become Ready.
    async fn app_ready_with(&self, files: &[(&str, &str)]) {
        self.create_source("repo").await;
        self.app_ready_from_published(files).await;
    }

    /// [`Fixture::app_ready_with`] on a GitRepository whose artifacts the test forges, for
    /// tests that go on to publish what source-controller never would.
    async fn app_ready_with_forged_source(&self, files: &[(&str, &str)]) {
        create_git_repository(&self.client, self.ns(), "repo").await;
        self.app_ready_from_published(files).await;
    }

    async fn app_ready_from_published(&self, files: &[(&str, &str)]) {
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

    /// Publishes `files` as publication `n` of the GitRepository `repo` (see [`publish`]).
    async fn publish<P: AsRef<str>, C: AsRef<str>>(&self, n: u32, files: &[(P, C)]) {
        publish(&self.client, self.ns(), "repo", n, files).await;
    }

    /// The revision of publication `n` of GitRepository `repo`.
    fn revision(&self, n: u32) -> String {
        published_revision(self.ns(), "repo", n)
    }
}

// ---------------------------------------------------------------------------------------
// Shared by the feature files.

/// Env var naming the reference kustomize binary (set by tests/run.sh).
const REFERENCE_KUSTOMIZE_ENV: &str = "KC_DIFF_KUSTOMIZE";

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

/// (group, version) of an object's apiVersion.
fn group_version(object: &Value) -> (String, String) {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

fn sops_fixture(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sops")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
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
