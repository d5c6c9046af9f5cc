//! Parity with Flux's own kustomize-controller: the same Kustomization, reconciled first by
//! Flux's controller (v1.9.5, built from the Go module proxy) and then by ours, in the same
//! namespace with the same name, source and objects, must end with the same status and the same
//! events. Times and durations are masked; everything else (conditions with their reasons and
//! messages, inventory, history digests and counts, event reasons, messages and annotations) is
//! compared as written.
//!
//! The Flux binary is `KC_FLUX_KC_BIN` (tests/run.sh sets it), else the one
//! `tests/bench/install-flux-controller.sh` builds (once per machine). When neither gives a
//! binary the tests fail and say why; they never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use regex::Regex;

use super::*;

/// Env var naming Flux's kustomize-controller binary.
const FLUX_CONTROLLER_ENV: &str = "KC_FLUX_KC_BIN";

/// Shard label values of the two controllers compared here.
const FLUX_SHARD: &str = "parity-flux";
const OURS_SHARD: &str = "parity-ours";

/// A Kustomization that every test namespace holds and no controller reconciles.
const UNRECONCILED: &str = "unreconciled";

/// How long a status must stay unchanged to count as the end of a reconcile.
const QUIET: Duration = Duration::from_millis(1500);

pub(super) fn flux_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let path = support::reference_tool(
            FLUX_CONTROLLER_ENV,
            "tests/bench/install-flux-controller.sh",
        );
        assert!(
            path.is_file(),
            "{FLUX_CONTROLLER_ENV}={} is not a file: Flux's kustomize-controller is needed for \
             these tests (tests/bench/install-flux-controller.sh builds it)",
            path.display()
        );
        path
    })
}

/// The two controllers, each watching only its shard of this run.
fn controllers() -> &'static [(&'static str, ControllerProcess); 2] {
    static CONTROLLERS: OnceLock<[(&str, ControllerProcess); 2]> = OnceLock::new();
    CONTROLLERS.get_or_init(|| {
        let selector = |shard: &str| {
            format!(
                "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={shard}",
                run_id()
            )
        };
        let flux = start_controller_binary(FLUX_SHARD, flux_binary(), &[&selector(FLUX_SHARD)]);
        let ours = start_controller(OURS_SHARD, &[&selector(OURS_SHARD)]);
        [(FLUX_SHARD, flux), (OURS_SHARD, ours)]
    })
}

/// What one controller left behind for one Kustomization.
#[derive(Debug)]
struct Outcome {
    status: Value,
    events: Vec<Value>,
}

/// The comparable part of one event, with how many times it was recorded.
fn event_summary(event: &Event) -> Value {
    json!({
        "type": event.type_,
        "reason": event.reason,
        "message": event.message,
        "count": event.count,
        "annotations": event.metadata.annotations,
        "source": event.source.as_ref().and_then(|s| s.component.clone()),
    })
}

/// When `event` was first recorded, in nanoseconds: both controllers' recorders (client-go's
/// and ours) name an event `<object>.<hex Unix nanoseconds>` when they create it, a finer clock
/// than its whole-second timestamps.
fn first_recorded(event: &Event) -> u64 {
    let name = event.metadata.name.as_deref().unwrap_or_default();
    name.rsplit_once('.')
        .and_then(|(_, nanos)| u64::from_str_radix(nanos, 16).ok())
        .unwrap_or_else(|| panic!("event {name:?} is not named <object>.<hex nanoseconds>"))
}

/// Creates Kustomization `app` (spec `spec` over the test defaults) in `shard`, waits until
/// `settled` holds of its status and the status has stopped changing, returns the status and
/// its events, then deletes it and waits until the controller has released it.
async fn reconcile_with(
    client: &kube::Client,
    ns: &str,
    shard: &str,
    controller: &ControllerProcess,
    spec: &Value,
    settled: fn(&Value) -> bool,
) -> Outcome {
    create_labelled_kustomization(
        client,
        ns,
        "app",
        "repo",
        spec.clone(),
        json!({SHARD_LABEL: shard}),
    )
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<Kustomization>(&()),
    );
    let mut last: Option<(Value, Instant)> = None;
    let (ks, status) = wait_for(WAIT, &format!("{shard}: a settled status"), async || {
        let ks = api.get("app").await.map_err(|e| e.to_string())?;
        let status = ks.data.get("status").cloned().unwrap_or(Value::Null);
        match &last {
            Some((seen, since))
                if *seen == status && since.elapsed() >= QUIET && settled(&status) =>
            {
                Ok((ks, status))
            }
            Some((seen, _)) if *seen == status => Err(format!("{status:#}")),
            _ => {
                last = Some((status.clone(), Instant::now()));
                Err(format!(
                    "{status:#}\n--- controller log tail ---\n{}",
                    tail(&controller.log(), 20)
                ))
            }
        }
    })
    .await;
    let uid = ks.metadata.uid.clone().unwrap_or_default();
    let mut listed = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .expect("list events")
        .items;
    listed.sort_by_key(first_recorded);
    let events: Vec<Value> = listed.iter().map(event_summary).collect();

    api.delete("app", &DeleteParams::default())
        .await
        .expect("delete Kustomization");
    wait_for(
        WAIT,
        &format!("{shard}: Kustomization released"),
        async || match api.get_opt("app").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    Outcome { status, events }
}

/// Replaces what legitimately differs between two runs: times, durations, and the
/// controllers' temporary directories.
fn mask(value: &mut Value) {
    static DURATION: OnceLock<Regex> = OnceLock::new();
    static TEMP_DIR: OnceLock<Regex> = OnceLock::new();
    let duration = DURATION.get_or_init(|| {
        Regex::new(r"finished in (\d+h)?(\d+m)?[\d.]+(ns|µs|us|ms|s)").expect("duration regex")
    });
    let temp_dir = TEMP_DIR.get_or_init(|| {
        Regex::new(r"/[^\s'\x22]*/t-controller-parity-[^\s'\x22/]*/tmp/kustomization-[^\s'\x22/]+")
            .expect("temp dir regex")
    });
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if matches!(
                    key.as_str(),
                    "lastTransitionTime"
                        | "firstReconciled"
                        | "lastReconciled"
                        | "lastReconciledDuration"
                ) {
                    *field = json!("<masked>");
                } else {
                    mask(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        Value::String(text) => {
            let masked = duration.replace_all(text, "finished in <duration>");
            let masked = temp_dir.replace_all(&masked, "<tmp>");
            *text = masked.into_owned();
        }
        _ => {}
    }
}

/// Runs `spec` on both controllers, one after the other, in one namespace whose GitRepository
/// `repo` serves `files`, and asserts that both left the same status and events.
async fn assert_same_outcome(
    test: &str,
    files: fn(&str) -> Vec<(String, String)>,
    spec: Value,
    settled: fn(&Value) -> bool,
) -> Value {
    assert_same_outcome_after(test, files, spec, settled, async |_, _| {}).await
}

/// [`assert_same_outcome`], with `prepare` run in the test namespace first.
async fn assert_same_outcome_after(
    test: &str,
    files: fn(&str) -> Vec<(String, String)>,
    spec: Value,
    settled: fn(&Value) -> bool,
    prepare: impl AsyncFn(&kube::Client, &str),
) -> Value {
    let controllers = controllers();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, test).await;
    prepare(&client, ns.name()).await;
    create_git_repository(&client, ns.name(), "repo").await;
    create_labelled_kustomization(
        &client,
        ns.name(),
        UNRECONCILED,
        "repo",
        json!({}),
        json!({SHARD_LABEL: "parity-none"}),
    )
    .await;
    let files = files(ns.name());
    let (url, digest) = serve(tarball(&files));
    publish_artifact(&client, ns.name(), "repo", &revision(1), &url, &digest).await;

    let mut outcomes = Vec::new();
    for (shard, controller) in controllers {
        let mut outcome =
            reconcile_with(&client, ns.name(), shard, controller, &spec, settled).await;
        mask(&mut outcome.status);
        outcome.events.iter_mut().for_each(mask);
        outcomes.push(outcome);
    }
    let [flux, ours] = <[Outcome; 2]>::try_from(outcomes).expect("two outcomes");
    assert_eq!(
        serde_json::to_string_pretty(&ours.status).unwrap_or_default(),
        serde_json::to_string_pretty(&flux.status).unwrap_or_default(),
        "{test}: status differs (left: ours, right: Flux's controller)"
    );
    assert_eq!(
        serde_json::to_string_pretty(&ours.events).unwrap_or_default(),
        serde_json::to_string_pretty(&flux.events).unwrap_or_default(),
        "{test}: events differ (left: ours, right: Flux's controller)"
    );
    ours.status
}

/// `deploy/a.yaml` and `deploy/b.yaml`, a ConfigMap each, in namespace `ns`.
fn two_config_maps(ns: &str) -> Vec<(String, String)> {
    ["a", "b"]
        .iter()
        .map(|name| (format!("deploy/{name}.yaml"), config_map(ns, name, "1")))
        .collect()
}

/// The Ready condition's (status, reason).
fn ready_condition(status: &Value) -> Option<(&str, &str)> {
    let ready = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some((ready["status"].as_str()?, ready["reason"].as_str()?))
}

#[tokio::test]
async fn applied_kustomization_has_fluxs_status_and_events() {
    let status = assert_same_outcome("parity-applied", two_config_maps, json!({}), |status| {
        ready_condition(status) == Some(("True", "ReconciliationSucceeded"))
    })
    .await;
    assert_eq!(
        status["inventory"]["entries"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(status["history"][0]["totalReconciliations"], 1);
}

/// A ConfigMap with a misspelt top-level field and a Deployment with a misspelt spec field
/// (and a CPU limit written as a number, which Go's typed conversion reads):
/// Flux's typed normalization drops what the built-in type does not have, so both are applied
/// without it, where a server-side apply of the raw objects is refused.
fn misspelt_built_in_fields(ns: &str) -> Vec<(String, String)> {
    vec![
        (
            "deploy/cm.yaml".into(),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n\
                 data:\n  a: b\ndatas:\n  c: d\n"
            ),
        ),
        (
            "deploy/deploy.yaml".into(),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
                 spec:\n  replica: 3\n  selector:\n    matchLabels:\n      app: web\n  template:\n\
                 \x20   metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n\
                 \x20     - name: app\n        image: registry.example/web:1\n\
                 \x20       resources:\n          limits:\n            cpu: 1\n"
            ),
        ),
    ]
}

#[tokio::test]
async fn misspelt_fields_of_built_in_kinds_are_dropped_as_flux_drops_them() {
    let status = assert_same_outcome(
        "parity-misspelt",
        misspelt_built_in_fields,
        json!({}),
        |status| ready_condition(status).is_some_and(|(_, reason)| reason != "Progressing"),
    )
    .await;
    assert_eq!(
        ready_condition(&status),
        Some(("True", "ReconciliationSucceeded")),
        "{status:#}"
    );
}

/// `deploy/kustomization.yaml` with no resources, a misspelt field and one generator: Flux
/// reads the root file leniently and sets `originAnnotations` on it so that kustomize does not
/// refuse it as empty.
fn generator_only_root(ns: &str) -> Vec<(String, String)> {
    vec![(
        "deploy/kustomization.yaml".to_string(),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {ns}\nnamePrefx: typo-\nconfigMapGenerator:\n\
             - name: settings\n  literals: [a=b]\n"
        ),
    )]
}

#[tokio::test]
async fn root_kustomization_file_is_read_as_flux_reads_it() {
    let status = assert_same_outcome(
        "parity-root-file",
        generator_only_root,
        json!({}),
        |status| ready_condition(status) == Some(("True", "ReconciliationSucceeded")),
    )
    .await;
    assert_eq!(
        status["inventory"]["entries"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn missing_dependency_has_fluxs_status_and_events() {
    assert_same_outcome(
        "parity-missing-dep",
        two_config_maps,
        json!({"dependsOn": [{"name": "absent"}]}),
        |status| ready_condition(status) == Some(("False", "DependencyNotReady")),
    )
    .await;
}

#[tokio::test]
async fn missing_path_has_fluxs_status_and_events() {
    assert_same_outcome(
        "parity-missing-path",
        two_config_maps,
        json!({"retryInterval": "1h", "path": "./absent"}),
        |status| ready_condition(status) == Some(("False", "ArtifactFailed")),
    )
    .await;
}

#[tokio::test]
async fn invalid_ready_expression_has_fluxs_status_and_events() {
    // The dependency exists (reconciled by no controller): Flux evaluates a readyExpr only
    // after it has read the dependency.
    assert_same_outcome(
        "parity-invalid-expr",
        two_config_maps,
        json!({"dependsOn": [{"name": UNRECONCILED, "readyExpr": "dep.status.conditions.exists("}]}),
        |status| ready_condition(status) == Some(("False", "InvalidCELExpression")),
    )
    .await;
}

#[tokio::test]
async fn dependency_not_ready_has_fluxs_status_and_events() {
    assert_same_outcome(
        "parity-dep-not-ready",
        two_config_maps,
        json!({"dependsOn": [{"name": UNRECONCILED}]}),
        |status| ready_condition(status) == Some(("False", "DependencyNotReady")),
    )
    .await;
}

/// Three ConfigMaps, the last of which the API server refuses once `${count}` is
/// substituted (a number where a string must be).
fn refused_substituted_value(ns: &str) -> Vec<(String, String)> {
    let mut files = two_config_maps(ns);
    files.push((
        "deploy/c.yaml".into(),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\ndata:\n  \
             count: ${{count}}\n"
        ),
    ));
    files
}

/// Three ConfigMaps, the last of which has a data key the API server refuses as invalid.
fn refused_invalid_key(ns: &str) -> Vec<(String, String)> {
    let mut files = two_config_maps(ns);
    files.push((
        "deploy/c.yaml".into(),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\ndata:\n  \
             bad/key: x\n"
        ),
    ));
    files
}

/// A build whose last object the API server refuses after substitution fails as Flux's
/// does: same Ready message (`dry-run failed`), history, and events; nothing applied.
#[tokio::test]
async fn refused_substituted_value_has_fluxs_status_and_events() {
    // One attempt each: the retry after a failure is far away.
    let status = assert_same_outcome(
        "parity-refused-value",
        refused_substituted_value,
        json!({"retryInterval": "1h", "postBuild": {"substitute": {"count": "3"}}}),
        |status| ready_condition(status) == Some(("False", "ReconciliationFailed")),
    )
    .await;
    assert!(status["inventory"].is_null(), "{status:#}");
}

/// A build whose last object the API server refuses as Invalid fails as Flux's does.
#[tokio::test]
async fn refused_invalid_key_has_fluxs_status_and_events() {
    let status = assert_same_outcome(
        "parity-refused-key",
        refused_invalid_key,
        json!({"retryInterval": "1h"}),
        |status| ready_condition(status) == Some(("False", "ReconciliationFailed")),
    )
    .await;
    assert!(status["inventory"].is_null(), "{status:#}");
}

/// Objects as people write them: a Deployment with the empty `strategy: {}` and
/// `resources: {}` that the API server fills with defaults, one without them and with a
/// container port without its (defaulted) protocol, a Secret written with `stringData`, and a
/// Service whose port has no protocol.
fn handover_objects(ns: &str) -> Vec<(String, String)> {
    let deployment = |name: &str, extra_spec: &str, container: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
             spec:\n  replicas: 1\n{extra_spec}  selector:\n    matchLabels:\n      app: {name}\n  \
             template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      \
             containers:\n      - name: app\n        image: registry.example/{name}:1\n{container}"
        )
    };
    vec![
        (
            "deploy/explicit.yaml".into(),
            deployment("explicit", "  strategy: {}\n", "        resources: {}\n"),
        ),
        (
            "deploy/implicit.yaml".into(),
            deployment(
                "implicit",
                "",
                "        ports:\n        - containerPort: 8080\n",
            ),
        ),
        (
            "deploy/secret.yaml".into(),
            super::normalization::string_data_secret(ns, &["a", "token"]),
        ),
        (
            "deploy/service.yaml".into(),
            super::normalization::protocol_less_service(ns),
        ),
    ]
}

/// (kind, name, resourceVersion, generation, managedFields) of every Deployment, Service and
/// Secret in `ns`.
async fn handover_snapshot(client: &kube::Client, ns: &str) -> Vec<Value> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Secret, Service};
    let entry = |kind: &str, meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        json!({
            "kind": kind,
            "name": meta.name,
            "resourceVersion": meta.resource_version,
            "generation": meta.generation,
            "managedFields": meta.managed_fields,
        })
    };
    let params = ListParams::default();
    let mut snapshot: Vec<Value> = Vec::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list Deployments")
    {
        snapshot.push(entry("Deployment", d.metadata));
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list Services")
    {
        snapshot.push(entry("Service", s.metadata));
    }
    for s in Api::<Secret>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .expect("list Secrets")
    {
        snapshot.push(entry("Secret", s.metadata));
    }
    snapshot.sort_by_key(|d| format!("{}/{}", d["kind"], d["name"]));
    snapshot
}

/// The change-set events among `events`: reason `Progressing`, as is the `Health check
/// passed` event, which is not one.
fn change_set_events(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| {
            e["reason"] == "Progressing"
                && !e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Health check"))
        })
        .collect()
}

/// Objects that Flux's controller applied are not written again when ours takes over the
/// Kustomization: no drift is seen in what the API server defaulted, so the objects keep
/// their resourceVersion and ours records no change set.
#[tokio::test]
async fn objects_applied_by_flux_are_left_unchanged_by_ours() {
    let [(flux_shard, flux), (ours_shard, ours)] = controllers();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "parity-handover").await;
    create_git_repository(&client, ns.name(), "repo").await;
    let files = handover_objects(ns.name());
    let (url, digest) = serve(tarball(&files));
    publish_artifact(&client, ns.name(), "repo", &revision(1), &url, &digest).await;
    // `prune: false` leaves the objects in place when a Kustomization is handed over;
    // `wait: true` ends each run with the Deployments rolled out, so that nothing else is
    // still writing them.
    let spec = json!({"prune": false, "wait": true});
    let succeeded =
        |status: &Value| ready_condition(status) == Some(("True", "ReconciliationSucceeded"));

    let flux_outcome = reconcile_with(&client, ns.name(), flux_shard, flux, &spec, succeeded).await;
    let created = change_set_events(&flux_outcome.events);
    assert_eq!(created.len(), 1, "Flux's change set: {created:?}");
    for object in [
        "Deployment/{ns}/explicit",
        "Deployment/{ns}/implicit",
        "Secret/{ns}/creds",
        "Service/{ns}/web",
    ] {
        let line = format!("{} created", object.replace("{ns}", ns.name()));
        assert!(
            created[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&line)),
            "{created:?}"
        );
    }
    let before = handover_snapshot(&client, ns.name()).await;

    let ours_outcome = reconcile_with(&client, ns.name(), ours_shard, ours, &spec, succeeded).await;
    let after = handover_snapshot(&client, ns.name()).await;
    assert_eq!(
        serde_json::to_string_pretty(&after).unwrap_or_default(),
        serde_json::to_string_pretty(&before).unwrap_or_default(),
        "ours wrote objects Flux applied (left: after ours, right: after Flux)"
    );
    let change_sets = change_set_events(&ours_outcome.events);
    assert!(change_sets.is_empty(), "ours: {change_sets:?}");
    assert_eq!(
        ours_outcome.status["inventory"], flux_outcome.status["inventory"],
        "same inventory"
    );
}

/// A key removed from a Secret's `stringData` leaves the live Secret under both
/// controllers: each applies `{a, token}`, then `{a}`, in a namespace of its own, and both
/// end with `data` holding `a` alone.
#[tokio::test]
async fn a_key_removed_from_string_data_leaves_the_secret_as_under_flux() {
    use super::normalization::{secret_keys, string_data_secret};
    let client = support::client().await;
    let mut outcomes = Vec::new();
    for (shard, controller) in controllers() {
        let ns = TestNamespace::new(&client, "parity-stringdata").await;
        let ns = ns.name();
        create_git_repository(&client, ns, "repo").await;
        let publish = async |n: u32, keys: &[&str]| {
            let files = [("deploy/secret.yaml", string_data_secret(ns, keys))];
            let (url, digest) = serve(tarball(&files));
            publish_artifact(&client, ns, "repo", &revision(n), &url, &digest).await;
        };
        publish(1, &["a", "token"]).await;
        create_labelled_kustomization(
            &client,
            ns,
            "app",
            "repo",
            json!({}),
            json!({SHARD_LABEL: shard}),
        )
        .await;
        super::apply::wait_applied(&client, ns, "app", &revision(1), controller).await;
        let first = secret_keys(&client, ns).await;
        publish(2, &["a"]).await;
        super::apply::wait_applied(&client, ns, "app", &revision(2), controller).await;
        outcomes.push((*shard, first, secret_keys(&client, ns).await));
    }
    for (shard, first, second) in &outcomes {
        assert_eq!(first, &["a", "token"], "{shard}: revision 1");
        assert_eq!(second, &["a"], "{shard}: revision 2 dropped token");
    }
}

/// `deploy/a.yaml`, a ConfigMap in `ns`, and `deploy/c.yaml`, one in `default`.
fn one_config_map_outside(ns: &str) -> Vec<(String, String)> {
    vec![
        ("deploy/a.yaml".to_string(), config_map(ns, "a", "1")),
        ("deploy/c.yaml".to_string(), config_map("default", "c", "1")),
    ]
}

#[tokio::test]
async fn forbidden_object_of_a_tenant_has_fluxs_status_and_events() {
    let status = assert_same_outcome_after(
        "parity-forbidden",
        one_config_map_outside,
        json!({"retryInterval": "1h", "serviceAccountName": "tenant"}),
        |status| ready_condition(status) == Some(("False", "ReconciliationFailed")),
        async |client, ns| super::tenancy::grant(client, ns, "tenant", &["*"]).await,
    )
    .await;
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("forbidden") && message.contains("system:serviceaccount:"),
        "{message}"
    );
}

#[tokio::test]
async fn missing_kubeconfig_secret_has_fluxs_status_and_events() {
    assert_same_outcome(
        "parity-kubeconfig-missing",
        two_config_maps,
        json!({"retryInterval": "1h", "kubeConfig": {"secretRef": {"name": "absent"}}}),
        |status| ready_condition(status) == Some(("False", "ReconciliationFailed")),
    )
    .await;
}

#[tokio::test]
async fn kubeconfig_secret_without_its_key_has_fluxs_status_and_events() {
    assert_same_outcome_after(
        "parity-kubeconfig-key",
        two_config_maps,
        json!({"retryInterval": "1h", "kubeConfig": {"secretRef": {"name": "spoke"}}}),
        |status| ready_condition(status) == Some(("False", "ReconciliationFailed")),
        async |client, ns| {
            super::tenancy::kubeconfig_secret(client, ns, "spoke", "config", "apiVersion: v1").await
        },
    )
    .await;
}

/// Families of Flux's controller this one has no counterpart for: Go's runtime, the
/// certificate watcher and webhook servers of controller-runtime (this controller serves no
/// TLS and no webhook).
const NOT_APPLICABLE: [&str; 4] = [
    "go_",
    "certwatcher_",
    "controller_runtime_webhook_panics",
    "controller_runtime_conversion_webhook_panics",
];

/// The families of a scrape: name (counters without `_total`) -> (type, label names).
fn metric_families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut families: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        let Some(declaration) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = declaration.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let name = match kind {
            "counter" => name.trim_end_matches("_total"),
            _ => name,
        };
        families.insert(name.to_string(), (kind.to_string(), Default::default()));
    }
    let label = Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)=""#).expect("label regex");
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.split(['{', ' ']).next().unwrap_or_default();
        let family = ["", "_total", "_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| series.strip_suffix(suffix))
            .find(|name| families.contains_key(*name));
        let Some(family) = family.map(str::to_string) else {
            continue;
        };
        let labels = line
            .split_once('{')
            .and_then(|(_, rest)| rest.rsplit_once('}'))
            .map(|(labels, _)| labels)
            .unwrap_or_default();
        if let Some((_, names)) = families.get_mut(&family) {
            names.extend(
                label
                    .captures_iter(labels)
                    .map(|c| c[1].to_string())
                    .filter(|name| name != "le"),
            );
        }
    }
    families
}

/// After the same reconcile, every family Flux's controller exposes is exposed by ours with
/// the same type and label names (dashboards and alerts written for Flux query them), and
/// both counted that reconcile.
#[tokio::test]
async fn metrics_have_fluxs_families_types_and_labels() {
    assert_same_outcome("parity-metrics", two_config_maps, json!({}), |status| {
        ready_condition(status) == Some(("True", "ReconciliationSucceeded"))
    })
    .await;
    let [(_, flux), (_, ours)] = controllers();
    let (flux_text, our_text) = (flux.metrics(), ours.metrics());
    let (flux_families, our_families) = (metric_families(&flux_text), metric_families(&our_text));
    let mut missing = Vec::new();
    for (name, (kind, labels)) in &flux_families {
        if NOT_APPLICABLE.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        match our_families.get(name) {
            Some((our_kind, our_labels)) if our_kind == kind && our_labels == labels => {}
            other => missing.push(format!("{name} {kind} {labels:?}: ours {other:?}")),
        }
    }
    assert!(
        missing.is_empty(),
        "families of Flux's controller that ours lacks or shapes differently:\n{}\n--- ours ---\n{our_text}",
        missing.join("\n")
    );
    for text in [&flux_text, &our_text] {
        let succeeded = text
            .lines()
            .find(|l| l.starts_with("controller_runtime_reconcile_total{controller=\"kustomization\",result=\"requeue_after\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        assert!(
            succeeded.is_some_and(|n| n >= 1.0),
            "a reconcile that asked to run again after its interval is counted: {succeeded:?}"
        );
    }
}
