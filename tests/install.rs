//! The two install paths, proven on the test cluster: `config/default` (kustomize) and
//! `charts/kustomize-controller` (helm).
//!
//! Each install goes into a namespace of its own that enforces the `restricted` Pod Security
//! level, so the Deployment becoming Available (kwok makes the pod Ready) proves that the API
//! server admitted the pod spec. The dedicated ClusterRole and leader-election Role are checked
//! with `kubectl auth can-i` for every request the controller's own bookkeeping makes, as a
//! ServiceAccount bound to those roles only (the installed ServiceAccount is also bound to
//! cluster-admin, which would answer yes to anything).
//!
//! The cluster is shared with other tests: names are unique per run (the kustomize overlay
//! adds a `namePrefix:`, so its ClusterRoles and ClusterRoleBindings do not collide), and every
//! namespace, cluster-scoped object and helm release made here is deleted at the end, also when
//! a check fails. The Kustomization CRD is the cluster's own: it is applied again (as
//! `kubectl apply -k` does), never deleted.
//!
//! helm is `KC_HELM` (tests/run.sh sets it), else the one tests/helm/install-helm.sh builds; the
//! reference kustomize is `KC_DIFF_KUSTOMIZE`, else tests/kustomize/install-kustomize.sh's.
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::Api;
use serde_json::{Value, json};

/// Our binary; `build` renders a kustomization as `kustomize build` does.
const OURS: &str = env!("CARGO_BIN_EXE_kustomize-controller");
const HELM_ENV: &str = "KC_HELM";
const KUSTOMIZE_ENV: &str = "KC_DIFF_KUSTOMIZE";
/// The chart, relative to the repository root.
const CHART: &str = "charts/kustomize-controller";
/// Any image does for kwok, which never pulls it.
const TEST_IMAGE_REPOSITORY: &str = "kwok.invalid/kustomize-controller";
const TEST_IMAGE_TAG: &str = "install-test";
/// How long a Deployment may take to become Available (kwok readies a pod in seconds).
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(90);
/// The Kustomization resource, as `kubectl auth can-i` names it.
const KUSTOMIZATIONS: &str = "kustomizations.kustomize.toolkit.fluxcd.io";

/// Requests the controller makes in any namespace for its own bookkeeping (not for applying a
/// Kustomization's objects, which the cluster-admin binding covers), as
/// `(verb, resource, subresource)`.
const CLUSTER_WIDE_REQUESTS: &[(&str, &str, &str)] = &[
    // controller/mod.rs watches Kustomizations; reconcile.rs and dependencies.rs get them.
    ("get", KUSTOMIZATIONS, ""),
    ("list", KUSTOMIZATIONS, ""),
    ("watch", KUSTOMIZATIONS, ""),
    // reconcile.rs adds and removes the finalizer with a JSON patch.
    ("patch", KUSTOMIZATIONS, ""),
    ("update", KUSTOMIZATIONS, "finalizers"),
    // status.rs writes the status with a merge patch.
    ("patch", KUSTOMIZATIONS, "status"),
    // controller/mod.rs watches every source kind; reconcile.rs gets the referenced one.
    ("get", "gitrepositories.source.toolkit.fluxcd.io", ""),
    ("list", "gitrepositories.source.toolkit.fluxcd.io", ""),
    ("watch", "gitrepositories.source.toolkit.fluxcd.io", ""),
    ("get", "ocirepositories.source.toolkit.fluxcd.io", ""),
    ("list", "ocirepositories.source.toolkit.fluxcd.io", ""),
    ("watch", "ocirepositories.source.toolkit.fluxcd.io", ""),
    ("get", "buckets.source.toolkit.fluxcd.io", ""),
    ("list", "buckets.source.toolkit.fluxcd.io", ""),
    ("watch", "buckets.source.toolkit.fluxcd.io", ""),
    ("get", "externalartifacts.source.toolkit.fluxcd.io", ""),
    ("list", "externalartifacts.source.toolkit.fluxcd.io", ""),
    ("watch", "externalartifacts.source.toolkit.fluxcd.io", ""),
    // The events crate (EventSink) creates events and patches repeats of one.
    ("create", "events", ""),
    ("patch", "events", ""),
    // controller/mod.rs watches labelled ConfigMaps and Secrets; cluster/reads.rs (for the
    // render's variables and keys) and cluster/mod.rs (kubeConfig, provider settings) get them.
    ("get", "secrets", ""),
    ("list", "secrets", ""),
    ("watch", "secrets", ""),
    ("get", "configmaps", ""),
    ("list", "configmaps", ""),
    ("watch", "configmaps", ""),
    // reconcile.rs checks that spec.serviceAccountName exists; cluster/mod.rs impersonates it
    // and requests tokens for workload identity.
    ("get", "serviceaccounts", ""),
    ("impersonate", "serviceaccounts", ""),
    ("create", "serviceaccounts", "token"),
];

/// Requests leader.rs makes in the install namespace: read, create and renew the Lease.
const INSTALL_NAMESPACE_REQUESTS: &[(&str, &str, &str)] = &[
    ("get", "leases.coordination.k8s.io", ""),
    ("create", "leases.coordination.k8s.io", ""),
    ("update", "leases.coordination.k8s.io", ""),
];

/// Requests the dedicated roles must not grant (checked in all namespaces), so that a probe
/// account that was accidentally given more (e.g. cluster-admin) fails the check.
const NOT_GRANTED_ANYWHERE: &[(&str, &str, &str)] = &[
    ("create", "deployments.apps", ""),
    ("delete", "namespaces", ""),
    ("update", "leases.coordination.k8s.io", ""),
    ("create", "secrets", ""),
];

/// What an install made: the names the RBAC checks need.
struct Installed<'a> {
    /// Where the controller runs.
    namespace: &'a str,
    /// The controller's ServiceAccount.
    service_account: &'a str,
    /// The ClusterRole for the controller's own requests.
    cluster_role: &'a str,
    /// The namespaced Role for leader election.
    leader_election_role: &'a str,
    /// The ClusterRoleBinding to cluster-admin.
    reconciler_binding: &'a str,
}

// ------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------

/// config/default renders the same with our engine as with kustomize, its containers are
/// restricted-compliant, and it installs and rolls out (through a uniquely named overlay).
#[tokio::test]
async fn config_default_renders_as_kustomize_does_and_installs() {
    let started = Instant::now();
    let config_default = support::repo_root().join("config/default");
    let ours = render_with_ours(&config_default);
    let reference = render_with_kustomize(&config_default);
    assert_same_documents("config/default", &ours, &reference);
    assert_restricted_containers("config/default (ours)", &parse_documents(&ours));

    let client = support::client().await;
    let id = support::unique_name("install-kustomize");
    let prefix = format!("{id}-");
    let names = ConfigNames::new(&prefix);
    let probe_binding = format!("{id}-rbac-probe");
    let _cleanup = Cleanup {
        helm_release: None,
        namespaces: vec![id.clone()],
        cluster_scoped: vec![
            ("clusterrole".into(), names.cluster_role.clone()),
            ("clusterrolebinding".into(), names.cluster_role.clone()),
            (
                "clusterrolebinding".into(),
                names.reconciler_binding.clone(),
            ),
            ("clusterrolebinding".into(), probe_binding.clone()),
        ],
    };

    let overlay = write_overlay(&config_default, &id, &prefix);
    let rendered = render_with_ours(overlay.path());
    assert_same_documents(
        "the install overlay",
        &rendered,
        &render_with_kustomize(overlay.path()),
    );
    let documents = parse_documents(&rendered);
    assert_restricted_containers("the install overlay", &documents);
    assert_namespace_enforces_restricted(&documents, &id);
    for binding in [&names.cluster_role, &names.reconciler_binding] {
        assert_binding_subject(&documents, binding, &id, &names.service_account);
    }

    run_ok(
        support::kubectl()
            .args(["apply", "--server-side", "--force-conflicts", "-k"])
            .arg(overlay.path()),
        None,
        "kubectl apply --server-side -k <overlay of config/default>",
    );
    assert_pod_security_enforced(&id);
    wait_available(&client, &id, &names.deployment).await;
    let installed = Installed {
        namespace: &id,
        service_account: &names.service_account,
        cluster_role: &names.cluster_role,
        leader_election_role: &names.leader_election_role,
        reconciler_binding: &names.reconciler_binding,
    };
    check_rbac(&client, &installed, &probe_binding).await;
    eprintln!("config/default: checked in {:?}", started.elapsed());
}

/// The chart installs with `helm install --skip-crds`, rolls out in a restricted namespace, its
/// roles cover the controller's requests, and `helm uninstall` removes it.
#[tokio::test]
async fn helm_chart_installs_and_uninstalls() {
    let started = Instant::now();
    let client = support::client().await;
    let release = support::unique_name("install-helm");
    let fullname = format!("{release}-kustomize-controller");
    let probe_binding = format!("{release}-rbac-probe");
    let mut cleanup = Cleanup {
        helm_release: Some((release.clone(), release.clone())),
        namespaces: vec![release.clone()],
        cluster_scoped: vec![("clusterrolebinding".into(), probe_binding.clone())],
    };
    create_restricted_namespace(&release);

    run_ok(
        helm()
            .args(["install", &release])
            .arg(support::repo_root().join(CHART))
            .args([
                "-n",
                &release,
                "--create-namespace",
                "--skip-crds",
                "--wait=false",
            ])
            .args(image_values()),
        None,
        &format!("helm install {release} {CHART}"),
    );
    assert_pod_security_enforced(&release);
    wait_available(&client, &release, &fullname).await;
    let leader_election_role = format!("{fullname}-leader-election");
    let reconciler_binding = format!("cluster-reconciler-{fullname}");
    let installed = Installed {
        namespace: &release,
        service_account: &fullname,
        cluster_role: &fullname,
        leader_election_role: &leader_election_role,
        reconciler_binding: &reconciler_binding,
    };
    check_rbac(&client, &installed, &probe_binding).await;

    run_ok(
        helm().args(["uninstall", &release, "-n", &release]),
        None,
        &format!("helm uninstall {release}"),
    );
    cleanup.helm_release = None;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let left = bindings
        .get_opt(&reconciler_binding)
        .await
        .unwrap_or_else(|e| panic!("GET ClusterRoleBinding {reconciler_binding}: {e}"));
    assert!(
        left.is_none(),
        "helm uninstall {release} left ClusterRoleBinding {reconciler_binding} behind"
    );
    eprintln!("helm chart: checked in {:?}", started.elapsed());
}

/// With two shards the chart renders the main Deployment and one per shard, each with its
/// label selector and a restricted-compliant container, and the API server accepts the whole
/// render (dry run).
#[tokio::test]
async fn helm_template_with_shards_renders_three_deployments_the_server_accepts() {
    let release = support::unique_name("install-shards");
    let fullname = format!("{release}-kustomize-controller");
    let _cleanup = Cleanup {
        helm_release: None,
        namespaces: vec![release.clone()],
        cluster_scoped: Vec::new(),
    };
    let rendered = helm_template(&release, &["--set", "sharding.shards={shard1,shard2}"]);
    let documents = parse_documents(&rendered);
    let deployments: Vec<&Value> = documents
        .iter()
        .filter(|d| d["kind"] == "Deployment")
        .collect();
    let names: Vec<&str> = deployments.iter().map(|d| name_of(d)).collect();
    assert_eq!(
        names,
        [
            fullname.clone(),
            format!("{fullname}-shard1"),
            format!("{fullname}-shard2")
        ],
        "helm template {CHART} with sharding.shards=[shard1,shard2]: Deployments"
    );
    let expected_selectors = [
        "--watch-label-selector=!sharding.fluxcd.io/key",
        "--watch-label-selector=sharding.fluxcd.io/key in (shard1)",
        "--watch-label-selector=sharding.fluxcd.io/key in (shard2)",
    ];
    for (deployment, selector) in deployments.iter().zip(expected_selectors) {
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        assert!(
            args.as_array()
                .is_some_and(|args| args.iter().any(|a| a == selector)),
            "Deployment {} of the sharded render lacks {selector:?}: {args}",
            name_of(deployment)
        );
    }
    assert_restricted_containers("helm template (sharded)", &documents);
    let service = documents
        .iter()
        .find(|d| d["kind"] == "Service" && name_of(d) == format!("{fullname}-metrics"))
        .unwrap_or_else(|| panic!("helm template (sharded): no Service {fullname}-metrics"));
    let selector = service["spec"]["selector"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for deployment in &deployments {
        let labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert!(
            !selector.is_empty() && selector.iter().all(|(key, value)| labels[key] == *value),
            "the metrics Service ({selector:?}) does not select the pods of Deployment {}: {labels}",
            name_of(deployment)
        );
    }

    create_restricted_namespace(&release);
    run_ok(
        support::kubectl().args(["apply", "--dry-run=server", "-f", "-"]),
        Some(&rendered),
        &format!("kubectl apply --dry-run=server of helm template {CHART} (sharded)"),
    );
}

/// With serviceMonitor.enabled the chart renders a ServiceMonitor that scrapes the metrics
/// Service; the pod settings users set in values reach the Deployment.
#[test]
fn helm_template_renders_service_monitor_and_pod_settings() {
    let release = support::unique_name("install-values");
    let fullname = format!("{release}-kustomize-controller");
    let values = tempfile::NamedTempFile::new().expect("temp values file");
    std::fs::write(values.path(), POD_SETTINGS_VALUES).expect("write the values file");
    let rendered = helm_template(
        &release,
        &[
            "--set",
            "serviceMonitor.enabled=true",
            "--set",
            "serviceMonitor.interval=30s",
            "--set",
            "serviceMonitor.labels.release=prometheus",
            "-f",
            &values.path().to_string_lossy(),
        ],
    );
    let documents = parse_documents(&rendered);
    assert_service_monitor(&documents, &fullname, &release);
    assert_pod_settings(find(&documents, "Deployment", &fullname));

    let default_render = parse_documents(&helm_template(&release, &[]));
    assert!(
        !default_render.iter().any(|d| d["kind"] == "ServiceMonitor"),
        "helm template {CHART} renders a ServiceMonitor although serviceMonitor.enabled \
         defaults to false"
    );
}

// ------------------------------------------------------------------------------------------
// Rendering
// ------------------------------------------------------------------------------------------

/// `kustomize-controller build <dir>`.
fn render_with_ours(dir: &Path) -> String {
    run_ok(
        Command::new(OURS).arg("build").arg(dir),
        None,
        &format!("kustomize-controller build {}", dir.display()),
    )
}

/// `kustomize build --reorder none <dir>` with the reference kustomize: FIFO order, as Flux's
/// controller (and ours) builds, like tests/kustomize_differential.rs compares.
fn render_with_kustomize(dir: &Path) -> String {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    let binary = BINARY.get_or_init(|| {
        support::reference_tool(KUSTOMIZE_ENV, "tests/kustomize/install-kustomize.sh")
    });
    run_ok(
        Command::new(binary)
            .args(["build", "--reorder", "none"])
            .arg(dir),
        None,
        &format!("kustomize build --reorder none {}", dir.display()),
    )
}

/// Panics, naming `what` and the differing paths, unless both renders hold the same documents
/// in the same order. Numbers compare by value: the CRD's `minimum: 0.0` comes out of kustomize
/// as `0` (and out of ours as written), the same number to the API server.
fn assert_same_documents(what: &str, ours: &str, reference: &str) {
    let normalized = |text: &str| -> Vec<Value> {
        parse_documents(text)
            .into_iter()
            .map(integral_floats_as_integers)
            .collect()
    };
    let (ours, reference) = (normalized(ours), normalized(reference));
    assert_eq!(
        ours.iter().map(document_id).collect::<Vec<_>>(),
        reference.iter().map(document_id).collect::<Vec<_>>(),
        "{what}: ours (left) and kustomize (right) render different objects or orders"
    );
    for (a, b) in ours.iter().zip(&reference) {
        let mut paths = Vec::new();
        differing_paths(String::new(), a, b, &mut paths);
        assert!(
            paths.is_empty(),
            "{what}: {} differs between ours and kustomize at:\n  {}",
            document_id(a),
            paths.join("\n  ")
        );
    }
}

/// `Kind namespace/name` of a document.
fn document_id(document: &Value) -> String {
    let namespace = document["metadata"]["namespace"].as_str().unwrap_or("");
    format!(
        "{} {namespace}/{}",
        document["kind"].as_str().unwrap_or(""),
        name_of(document)
    )
}

/// `value` with every float that holds an integer (0.0) turned into that integer (0).
fn integral_floats_as_integers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => items.into_iter().map(integral_floats_as_integers).collect(),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, integral_floats_as_integers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Appends `pointer: ours <a> / kustomize <b>` for every place where `a` and `b` differ (at
/// most 20 lines).
fn differing_paths(pointer: String, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 20 || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let (left, right) = (&a[key.as_str()], &b[key.as_str()]);
                differing_paths(format!("{pointer}/{key}"), left, right, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (index, (left, right)) in x.iter().zip(y).enumerate() {
                differing_paths(format!("{pointer}/{index}"), left, right, out);
            }
        }
        _ => out.push(format!("{pointer}: ours {a} / kustomize {b}")),
    }
}

/// A temporary overlay of `config_default` (referred to by a relative path: kustomize refuses
/// absolute ones) that installs into `namespace`, prefixes every name, sets a test image and
/// makes the namespace enforce the `restricted` Pod Security level.
fn write_overlay(config_default: &Path, namespace: &str, prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir for the overlay");
    let from = dir.path().canonicalize().expect("canonical overlay dir");
    let to = config_default
        .canonicalize()
        .expect("canonical config/default");
    let ups = "../".repeat(from.components().count() - 1);
    let relative = format!("{ups}{}", to.to_string_lossy().trim_start_matches('/'));
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n\
         - {relative}\n\
         namespace: {namespace}\n\
         namePrefix: {prefix}\n\
         images:\n\
         - name: kustomize-controller\n  newName: {TEST_IMAGE_REPOSITORY}\n  newTag: {TEST_IMAGE_TAG}\n\
         patches:\n\
         - target:\n    kind: Namespace\n  patch: |\n    \
             - op: add\n      path: /metadata/labels/pod-security.kubernetes.io~1enforce\n      value: restricted\n    \
             - op: add\n      path: /metadata/labels/pod-security.kubernetes.io~1enforce-version\n      value: latest\n"
    );
    std::fs::write(dir.path().join("kustomization.yaml"), kustomization)
        .expect("write the overlay's kustomization.yaml");
    dir
}

/// Names of the objects config/default makes, with an overlay's `namePrefix:`.
struct ConfigNames {
    deployment: String,
    service_account: String,
    cluster_role: String,
    leader_election_role: String,
    reconciler_binding: String,
}

impl ConfigNames {
    fn new(prefix: &str) -> Self {
        ConfigNames {
            deployment: format!("{prefix}kustomize-controller"),
            service_account: format!("{prefix}kustomize-controller"),
            cluster_role: format!("{prefix}kustomize-controller"),
            leader_election_role: format!("{prefix}kustomize-controller-leader-election"),
            reconciler_binding: format!("{prefix}cluster-reconciler-kustomize-controller"),
        }
    }
}

/// `helm template <release> <chart> -n <release>` with the test image and `extra` arguments.
fn helm_template(release: &str, extra: &[&str]) -> String {
    run_ok(
        helm()
            .args(["template", release])
            .arg(support::repo_root().join(CHART))
            .args(["-n", release])
            .args(image_values())
            .args(extra),
        None,
        &format!("helm template {CHART} {}", extra.join(" ")),
    )
}

/// `--set` arguments for the test image.
fn image_values() -> [String; 4] {
    [
        "--set".into(),
        format!("image.repository={TEST_IMAGE_REPOSITORY}"),
        "--set".into(),
        format!("image.tag={TEST_IMAGE_TAG}"),
    ]
}

/// Values for every pod setting Flux users expect the chart to pass through.
const POD_SETTINGS_VALUES: &str = r#"
resources:
  limits: {cpu: 500m, memory: 256Mi}
  requests: {cpu: 50m, memory: 32Mi}
tolerations:
- {key: dedicated, operator: Equal, value: flux, effect: NoSchedule}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/os, operator: In, values: [linux]}
nodeSelector: {kubernetes.io/arch: amd64}
podAnnotations: {example.com/team: platform}
priorityClassName: system-cluster-critical
extraArgs: [--no-cross-namespace-refs=true]
"#;

/// The Deployment's pod carries every setting of [`POD_SETTINGS_VALUES`].
fn assert_pod_settings(deployment: &Value) {
    let values: Value = serde_saphyr::from_str(POD_SETTINGS_VALUES).expect("pod settings YAML");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let name = name_of(deployment);
    let checks = [
        ("resources", &container["resources"], &values["resources"]),
        (
            "tolerations",
            &pod["spec"]["tolerations"],
            &values["tolerations"],
        ),
        ("affinity", &pod["spec"]["affinity"], &values["affinity"]),
        (
            "nodeSelector",
            &pod["spec"]["nodeSelector"],
            &values["nodeSelector"],
        ),
        (
            "priorityClassName",
            &pod["spec"]["priorityClassName"],
            &values["priorityClassName"],
        ),
        (
            "podAnnotations",
            &pod["metadata"]["annotations"]["example.com/team"],
            &values["podAnnotations"]["example.com/team"],
        ),
    ];
    for (value, rendered, expected) in checks {
        assert_eq!(
            rendered, expected,
            "Deployment {name}: values.{value} is not passed through"
        );
    }
    let args = container["args"].as_array().cloned().unwrap_or_default();
    assert!(
        args.iter().any(|a| a == "--no-cross-namespace-refs=true"),
        "Deployment {name}: values.extraArgs is not passed through: {args:?}"
    );
}

/// The ServiceMonitor scrapes /metrics on port http-prom of the chart's metrics Service, at the
/// interval and with the extra labels set in the test.
fn assert_service_monitor(documents: &[Value], fullname: &str, namespace: &str) {
    let monitor = find(documents, "ServiceMonitor", fullname);
    let service = find(documents, "Service", &format!("{fullname}-metrics"));
    assert_eq!(
        monitor["apiVersion"], "monitoring.coreos.com/v1",
        "ServiceMonitor {fullname}: apiVersion"
    );
    assert_eq!(
        monitor["metadata"]["labels"]["release"], "prometheus",
        "ServiceMonitor {fullname}: serviceMonitor.labels are not on it"
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([namespace]),
        "ServiceMonitor {fullname}: namespaceSelector"
    );
    let endpoints = &monitor["spec"]["endpoints"];
    assert_eq!(
        endpoints,
        &json!([{"port": "http-prom", "path": "/metrics", "interval": "30s"}]),
        "ServiceMonitor {fullname}: endpoints"
    );
    let service_ports = service["spec"]["ports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        service_ports.iter().any(|p| p["name"] == "http-prom"),
        "Service {fullname}-metrics has no port http-prom for the ServiceMonitor: {service_ports:?}"
    );
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .filter(|labels| !labels.is_empty())
        .unwrap_or_else(|| panic!("ServiceMonitor {fullname}: empty spec.selector.matchLabels"));
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "ServiceMonitor {fullname} selects {key}={value}, which Service {fullname}-metrics \
             does not carry"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Rendered objects
// ------------------------------------------------------------------------------------------

/// The documents of a YAML stream, empty ones left out.
fn parse_documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("render is not valid YAML: {e}\n{text}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// `metadata.name` of a document ("" when missing).
fn name_of(document: &Value) -> &str {
    document["metadata"]["name"].as_str().unwrap_or("")
}

/// The document of `kind` named `name`; panics naming both when the render has none.
fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind && name_of(d) == name)
        .unwrap_or_else(|| panic!("the render has no {kind} {name}"))
}

/// Every container of every Deployment in `documents` (at least one) has the securityContext
/// the `restricted` Pod Security level requires.
fn assert_restricted_containers(what: &str, documents: &[Value]) {
    let deployments: Vec<&Value> = documents
        .iter()
        .filter(|d| d["kind"] == "Deployment")
        .collect();
    assert!(!deployments.is_empty(), "{what}: no Deployment rendered");
    for deployment in deployments {
        let containers = deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !containers.is_empty(),
            "{what}: Deployment {} has no containers",
            name_of(deployment)
        );
        for container in containers {
            let context = &container["securityContext"];
            let expected = [
                ("runAsNonRoot", &context["runAsNonRoot"], json!(true)),
                (
                    "readOnlyRootFilesystem",
                    &context["readOnlyRootFilesystem"],
                    json!(true),
                ),
                (
                    "allowPrivilegeEscalation",
                    &context["allowPrivilegeEscalation"],
                    json!(false),
                ),
                (
                    "seccompProfile.type",
                    &context["seccompProfile"]["type"],
                    json!("RuntimeDefault"),
                ),
                (
                    "capabilities.drop",
                    &context["capabilities"]["drop"],
                    json!(["ALL"]),
                ),
            ];
            for (field, actual, wanted) in expected {
                assert_eq!(
                    actual,
                    &wanted,
                    "{what}: Deployment {} container {}: securityContext.{field}",
                    name_of(deployment),
                    container["name"]
                );
            }
        }
    }
}

/// The render's Namespace is `name` and enforces the `restricted` level.
fn assert_namespace_enforces_restricted(documents: &[Value], name: &str) {
    let labels = &find(documents, "Namespace", name)["metadata"]["labels"];
    assert_eq!(
        (
            &labels["pod-security.kubernetes.io/enforce"],
            &labels["pod-security.kubernetes.io/enforce-version"]
        ),
        (&json!("restricted"), &json!("latest")),
        "Namespace {name} of the overlay: Pod Security labels"
    );
}

/// The rendered ClusterRoleBinding `name` binds exactly the ServiceAccount `namespace/account`.
fn assert_binding_subject(documents: &[Value], name: &str, namespace: &str, account: &str) {
    let binding = find(documents, "ClusterRoleBinding", name);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]),
        "ClusterRoleBinding {name}: subjects do not follow the overlay's namespace"
    );
}

// ------------------------------------------------------------------------------------------
// Cluster
// ------------------------------------------------------------------------------------------

/// Creates `name` with labels that make the API server reject pods below the `restricted`
/// Pod Security level.
fn create_restricted_namespace(name: &str) {
    let manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    \
         kustomize-controller-tests/test: \"true\"\n    \
         pod-security.kubernetes.io/enforce: restricted\n    \
         pod-security.kubernetes.io/enforce-version: latest\n"
    );
    run_ok(
        support::kubectl().args(["create", "-f", "-"]),
        Some(&manifest),
        &format!("kubectl create namespace {name}"),
    );
}

/// The API server rejects a root pod in `namespace` (dry run): its Pod Security admission
/// enforces there, so a Deployment's pod that starts there is compliant.
fn assert_pod_security_enforced(namespace: &str) {
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-security-probe\n  namespace: {namespace}\n\
         spec:\n  containers:\n  - name: probe\n    image: {TEST_IMAGE_REPOSITORY}:{TEST_IMAGE_TAG}\n    \
         securityContext:\n      privileged: true\n"
    );
    let output = run(
        support::kubectl().args(["create", "--dry-run=server", "-f", "-"]),
        Some(&pod),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("violates PodSecurity"),
        "namespace {namespace} admitted a privileged pod (dry run) or failed otherwise: {}{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// Waits (at most [`ROLLOUT_TIMEOUT`]) for Deployment `namespace/name` to be Available.
async fn wait_available(client: &kube::Client, namespace: &str, name: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let what = format!("Deployment {namespace}/{name} to become Available");
    support::wait_for(ROLLOUT_TIMEOUT, &what, async || {
        let deployment = deployments.get(name).await.map_err(|e| e.to_string())?;
        let conditions = deployment
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
        {
            Ok(())
        } else {
            Err(format!("conditions: {conditions:?}"))
        }
    })
    .await;
}

/// The RBAC of an install: the cluster-admin binding is there for its ServiceAccount, and a
/// probe ServiceAccount bound only to the install's ClusterRole and leader-election Role may
/// make every request of the controller's bookkeeping and none of a few others.
async fn check_rbac(client: &kube::Client, installed: &Installed<'_>, probe_binding: &str) {
    assert_bound_to_cluster_admin(client, installed).await;
    let probe = bind_probe_account(installed, probe_binding);
    // RBAC caches in the API server settle within a moment of the bindings' creation.
    let what = format!(
        "{probe}, bound to ClusterRole {} and Role {}/{}, to be granted every request of the \
         controller's bookkeeping (last observed: the denied ones)",
        installed.cluster_role, installed.namespace, installed.leader_election_role
    );
    support::wait_for(
        Duration::from_secs(10),
        &what,
        async || match denied_requests(&probe, installed.namespace) {
            denied if denied.is_empty() => Ok(()),
            denied => Err(denied),
        },
    )
    .await;
    for &(verb, resource, subresource) in NOT_GRANTED_ANYWHERE {
        assert!(
            !can_i(&probe, verb, resource, subresource, None),
            "{probe} (bound to ClusterRole {} and Role {}/{}) may {verb} {resource} in all \
             namespaces: the dedicated roles grant more than the controller's bookkeeping",
            installed.cluster_role,
            installed.namespace,
            installed.leader_election_role
        );
    }
}

/// The requests of [`CLUSTER_WIDE_REQUESTS`] and [`INSTALL_NAMESPACE_REQUESTS`] that `user` may
/// not make, as "verb resource[/subresource] (scope)".
fn denied_requests(user: &str, namespace: &str) -> Vec<String> {
    let cluster_wide = CLUSTER_WIDE_REQUESTS.iter().map(|r| (r, None));
    let in_namespace = INSTALL_NAMESPACE_REQUESTS
        .iter()
        .map(|r| (r, Some(namespace)));
    cluster_wide
        .chain(in_namespace)
        .filter(|&(&(verb, resource, subresource), scope)| {
            !can_i(user, verb, resource, subresource, scope)
        })
        .map(|(&(verb, resource, subresource), scope)| {
            format!(
                "{verb} {resource}{}{subresource} ({})",
                if subresource.is_empty() { "" } else { "/" },
                scope.map_or("all namespaces".to_string(), |ns| format!("namespace {ns}"))
            )
        })
        .collect()
}

/// ClusterRoleBinding `installed.reconciler_binding` binds cluster-admin to the install's
/// ServiceAccount, which may therefore apply anything.
async fn assert_bound_to_cluster_admin(client: &kube::Client, installed: &Installed<'_>) {
    let name = installed.reconciler_binding;
    let binding = Api::<ClusterRoleBinding>::all(client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("GET ClusterRoleBinding {name}: {e}"));
    assert_eq!(
        binding.role_ref.name, "cluster-admin",
        "ClusterRoleBinding {name}: roleRef"
    );
    let subjects: Vec<(String, String, Option<String>)> = binding
        .subjects
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.kind, s.name, s.namespace))
        .collect();
    assert_eq!(
        subjects,
        [(
            "ServiceAccount".to_string(),
            installed.service_account.to_string(),
            Some(installed.namespace.to_string())
        )],
        "ClusterRoleBinding {name}: subjects"
    );
    let user = service_account_user(installed.namespace, installed.service_account);
    assert!(
        can_i(&user, "create", "deployments.apps", "", None),
        "{user} may not create Deployments although ClusterRoleBinding {name} binds it to \
         cluster-admin"
    );
}

/// Creates ServiceAccount `rbac-probe` in the install namespace, bound (ClusterRoleBinding
/// `binding`, RoleBinding `rbac-probe`) to the install's ClusterRole and leader-election Role
/// only; returns its user name.
fn bind_probe_account(installed: &Installed<'_>, binding: &str) -> String {
    let namespace = installed.namespace;
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "rbac-probe", "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": installed.cluster_role,
                },
                "subjects": [{"kind": "ServiceAccount", "name": "rbac-probe", "namespace": namespace}],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "rbac-probe", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": installed.leader_election_role,
                },
                "subjects": [{"kind": "ServiceAccount", "name": "rbac-probe", "namespace": namespace}],
            },
        ],
    });
    run_ok(
        support::kubectl().args(["create", "-f", "-"]),
        Some(&manifest.to_string()),
        &format!("kubectl create the RBAC probe account in {namespace}"),
    );
    service_account_user(namespace, "rbac-probe")
}

/// The user name the API server gives ServiceAccount `namespace/name`.
fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `kubectl auth can-i --as=<user> <verb> <resource> [--subresource] (-n <ns> | -A)`.
fn can_i(
    user: &str,
    verb: &str,
    resource: &str,
    subresource: &str,
    namespace: Option<&str>,
) -> bool {
    let mut command = support::kubectl();
    command.args(["auth", "can-i", verb, resource, "--as", user]);
    if !subresource.is_empty() {
        command.arg(format!("--subresource={subresource}"));
    }
    match namespace {
        Some(ns) => command.args(["-n", ns]),
        None => command.arg("--all-namespaces"),
    };
    let output = run(&mut command, None);
    match String::from_utf8_lossy(&output.stdout).trim() {
        "yes" => true,
        "no" => false,
        other => panic!(
            "kubectl auth can-i {verb} {resource} --subresource={subresource} --as {user}: \
             unexpected answer {other:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

/// helm, pointed at the test cluster, with its configuration and cache in a temporary
/// directory (not the user's).
fn helm() -> Command {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    let binary =
        BINARY.get_or_init(|| support::reference_tool(HELM_ENV, "tests/helm/install-helm.sh"));
    let home = HOME.get_or_init(|| tempfile::tempdir().expect("temp dir for helm's home"));
    let mut command = Command::new(binary);
    command
        .env("KUBECONFIG", support::kubeconfig_path())
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"));
    command
}

/// Deletes what a test made, when it ends (passed or not): the helm release, then
/// cluster-scoped objects and namespaces (without waiting for the namespaces to go).
struct Cleanup {
    /// `(release, namespace)` still to uninstall.
    helm_release: Option<(String, String)>,
    namespaces: Vec<String>,
    /// `(kind, name)` of cluster-scoped objects.
    cluster_scoped: Vec<(String, String)>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some((release, namespace)) = &self.helm_release {
            report_failure(
                helm().args(["uninstall", release, "-n", namespace, "--wait=false"]),
                &format!("helm uninstall {release}"),
            );
        }
        for (kind, name) in &self.cluster_scoped {
            report_failure(
                support::kubectl().args([
                    "delete",
                    kind,
                    name,
                    "--ignore-not-found",
                    "--wait=false",
                ]),
                &format!("kubectl delete {kind} {name}"),
            );
        }
        for namespace in &self.namespaces {
            report_failure(
                support::kubectl().args([
                    "delete",
                    "namespace",
                    namespace,
                    "--ignore-not-found",
                    "--wait=false",
                ]),
                &format!("kubectl delete namespace {namespace}"),
            );
        }
    }
}

/// Runs a clean-up command; prints (does not panic on) a failure.
fn report_failure(command: &mut Command, what: &str) {
    let output = run(command, None);
    if !output.status.success() {
        eprintln!(
            "install tests: clean-up `{what}` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
}

// ------------------------------------------------------------------------------------------
// Processes
// ------------------------------------------------------------------------------------------

/// Runs `command`, feeding it `stdin`, and returns its output.
fn run(command: &mut Command, stdin: Option<&str>) -> Output {
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", command.get_program()));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("cannot write to {:?}: {e}", command.get_program()));
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {:?}: {e}", command.get_program()))
}

/// Runs `command` (described as `what`), and returns its stdout; panics with its stderr when
/// it fails.
fn run_ok(command: &mut Command, stdin: Option<&str>, what: &str) -> String {
    let output = run(command, stdin);
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap_or_else(|e| panic!("{what}: output is not UTF-8: {e}"))
}
