//! Drift beyond Flux, off by default. Prompt correction: with the annotation
//! `kustomize.toolkit.fluxcd.io/drift-correction: prompt`, a write by another manager to an
//! applied object is reverted seconds later, not at the next interval. Detect-only: with
//! `kustomize.toolkit.fluxcd.io/drift-detection: warn`, drift is reported (an event, the
//! `Drifted` condition, `diff`) and left as it is while the inputs are unchanged.

use super::apply::{kustomization_events, merge_patch_as, reconcile_now, web_deployment};
use super::*;
use k8s_openapi::api::apps::v1::Deployment;

const PROMPT: &str = "kustomize.toolkit.fluxcd.io/drift-correction";
const DETECT: &str = "kustomize.toolkit.fluxcd.io/drift-detection";

/// Lines of the controller's log saying that drift of a Kustomization in `ns` was detected
/// and is being `what` ("correcting" or "reporting").
fn drift_lines_in(ns: &str, what: &str) -> usize {
    let said = format!("drift detected, {what}");
    controller()
        .log()
        .lines()
        .map(without_colours)
        .filter(|line| line.contains(&said) && line.contains(ns))
        .count()
}

/// Lines of the controller's log saying that drift of a Kustomization in `ns` is corrected.
fn corrections_in(ns: &str) -> usize {
    drift_lines_in(ns, "correcting")
}

/// Waits until the `Drifted` condition of `app` names the edit [`edit`] made.
async fn wait_edit_reported(client: &kube::Client, ns: &str) {
    wait_drifted(
        client,
        ns,
        &format!("ConfigMap/{ns}/a changed by kubectl-edit"),
    )
    .await;
}

/// `data.value` of ConfigMap `name`.
async fn value_of(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    let map = api.get_opt(name).await.expect("read ConfigMap")?;
    map.data.unwrap_or_default().get("value").cloned()
}

/// Writes `data.value: edited` into ConfigMap `a` as `kubectl edit` does.
async fn edit(api: &Api<ConfigMap>) {
    merge_patch_as(
        api,
        "a",
        "kubectl-edit",
        json!({"data": {"value": "edited"}}),
    )
    .await;
}

/// Waits until ConfigMap `a` holds its applied value again.
async fn wait_restored(api: &Api<ConfigMap>, what: &str) {
    wait_for(WAIT, what, async || {
        match value_of(api, "a").await.as_deref() {
            Some("1") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Creates Kustomization `app` of source `repo` with `annotations`, a one-hour interval (so
/// that nothing but prompt correction reverts drift during a test) and the `extra` spec
/// fields, and waits until it is Ready.
async fn create_app(f: &Fixture, annotations: Value, extra: Value) {
    let ns = f.ns();
    let mut spec = json!({
        "interval": "1h", "prune": true, "path": "./deploy",
        "sourceRef": {"kind": "GitRepository", "name": "repo"},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    let ks: Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {
            "name": "app", "namespace": ns, "annotations": annotations,
            "labels": run_labels(json!({})),
        },
        "spec": spec,
    }))
    .expect("a Kustomization");
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &ks)
        .await
        .expect("create Kustomization");
    wait_ready_with(&f.client, ns, "app", ConditionStatus::True, "applied").await;
}

/// A Kustomization `app` with a one-hour interval (so that nothing but prompt correction
/// reverts drift during the test) applying ConfigMap `a`, with `annotations`.
async fn one_config_map(f: &Fixture, annotations: Value) {
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish(1, &[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    create_app(f, annotations, json!({})).await;
}

#[tokio::test]
async fn an_edit_is_reverted_promptly_with_the_annotation_and_not_without() {
    let f = Fixture::new("drift-prompt").await;
    let ns = f.ns();
    one_config_map(&f, json!({PROMPT: "prompt"})).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    let edited = std::time::Instant::now();
    edit(&config_maps).await;
    wait_restored(&config_maps, "the edit to be reverted").await;
    eprintln!("edit reverted after {:?}", edited.elapsed());
    let status = kustomization_status_json(&f.client, ns).await;
    assert!(status["lastHandledReconcileAt"].is_null(), "{status:#}");
    assert!(corrections_in(ns) >= 1, "{}", tail(&controller().log(), 20));
    // Beyond Flux, the change set names who drifted the object.
    let corrected = format!("ConfigMap/{ns}/a configured (drifted by kubectl-edit)");
    let events = kustomization_events(&f.client, ns, "app").await;
    assert!(
        events.iter().any(|e| e.message == corrected),
        "{:?}",
        events.iter().map(|e| &e.message).collect::<Vec<_>>()
    );

    // Deleted by somebody: recreated as promptly.
    config_maps
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    wait_restored(&config_maps, "the deleted object to be recreated").await;

    // Without the annotation (and the flag at its default), drift waits for the interval.
    let g = Fixture::new("drift-interval").await;
    let other_ns = g.ns();
    one_config_map(&g, json!({})).await;
    let other_maps: Api<ConfigMap> = Api::namespaced(g.client.clone(), other_ns);
    edit(&other_maps).await;
    // Three times the debounce a prompt correction waits.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(value_of(&other_maps, "a").await.as_deref(), Some("edited"));
    assert_eq!(corrections_in(other_ns), 0);
}

async fn kustomization_status_json(client: &kube::Client, ns: &str) -> Value {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get("app")
        .await
        .expect("get Kustomization");
    serde_json::to_value(ks.status).expect("status as JSON")
}

/// An autoscaler owning `spec.replicas`, which `spec.ignore` leaves to it, causes no
/// reconcile; a write to another field of the same Deployment does.
#[tokio::test]
async fn a_write_to_an_ignored_field_is_not_drift() {
    let f = Fixture::new("drift-ignore").await;
    let ns = f.ns();
    let web = web_deployment(ns);
    f.create_source("repo").await;
    f.publish(1, &[("deploy/web.yaml", &web)]).await;
    let ignore = json!([{"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}}]);
    create_app(&f, json!({PROMPT: "prompt"}), json!({"ignore": ignore})).await;
    let deployments: Api<Deployment> = Api::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &deployments,
        "web",
        "horizontal-pod-autoscaler",
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(corrections_in(ns), 0, "{}", tail(&controller().log(), 20));
    let replicas = deployments
        .get("web")
        .await
        .expect("web")
        .spec
        .and_then(|s| s.replicas);
    assert_eq!(replicas, Some(3));

    merge_patch_as(
        &deployments,
        "web",
        "kubectl-edit",
        json!({"spec": {"paused": true}}),
    )
    .await;
    wait_for(WAIT, "the paused edit to be reverted", async || {
        let paused = deployments.get("web").await.map_err(|e| e.to_string())?;
        match paused.spec.and_then(|s| s.paused) {
            Some(true) => Err("still paused".to_string()),
            _ => Ok(()),
        }
    })
    .await;
    let replicas = deployments
        .get("web")
        .await
        .expect("web")
        .spec
        .and_then(|s| s.replicas);
    assert_eq!(
        replicas,
        Some(3),
        "the ignored field keeps the autoscaler's value"
    );
}

/// Another writer setting the field back again and again is answered at a slowing pace,
/// said once in an event, never in a loop.
#[tokio::test]
async fn two_writers_fighting_are_throttled() {
    let f = Fixture::new("drift-fight").await;
    let ns = f.ns();
    one_config_map(&f, json!({PROMPT: "prompt"})).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    let mut writes = 0;
    let fighting = std::time::Instant::now();
    while fighting.elapsed() < Duration::from_secs(16) {
        merge_patch_as(
            &config_maps,
            "a",
            "rival",
            json!({"data": {"value": format!("rival-{writes}")}}),
        )
        .await;
        writes += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Corrections at 2 s, then 4, 8 and 16 s apart: four in sixteen seconds, however many
    // writes the rival makes.
    let corrections = corrections_in(ns);
    assert!(writes >= 30, "{writes} writes");
    assert!(
        (2..=5).contains(&corrections),
        "{corrections} corrections for {writes} writes"
    );
    let throttled: Vec<String> = kustomization_events(&f.client, ns, "app")
        .await
        .into_iter()
        .filter(|e| e.reason == "DriftCorrectionThrottled")
        .map(|e| e.message)
        .collect();
    assert_eq!(throttled.len(), 1, "{throttled:?}");
    assert!(
        throttled[0].starts_with(&format!(
            "drift correction throttled: ConfigMap/{ns}/a was written by rival again"
        )),
        "{throttled:?}"
    );
}

/// The `Drifted` condition of Kustomization `app`: (status, reason, message).
async fn drifted_condition(client: &kube::Client, ns: &str) -> Option<(String, String, String)> {
    let status = kustomization_status_json(client, ns).await;
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    conditions.iter().find(|c| c["type"] == "Drifted").map(|c| {
        let text = |field: &str| c[field].as_str().unwrap_or_default().to_string();
        (text("status"), text("reason"), text("message"))
    })
}

/// Waits until the `Drifted` condition of `app` is True with a message containing `part`.
async fn wait_drifted(client: &kube::Client, ns: &str, part: &str) {
    wait_for(
        WAIT,
        &format!("Drifted naming {part:?}"),
        async || match drifted_condition(client, ns).await {
            Some((status, reason, message))
                if status == "True" && reason == "DriftDetected" && message.contains(part) =>
            {
                Ok(())
            }
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&controller().log(), 20)
            )),
        },
    )
    .await;
}

/// The messages of the `DriftDetected` events of `app`, with their counts.
async fn drift_reports(client: &kube::Client, ns: &str) -> Vec<(String, i32)> {
    kustomization_events(client, ns, "app")
        .await
        .into_iter()
        .filter(|e| e.reason == "DriftDetected")
        .map(|e| (e.message, e.count))
        .collect()
}

/// The value of metric `family` for Kustomization `app` in `ns`, if it has one.
fn metric(family: &str, ns: &str) -> Option<String> {
    controller()
        .metrics()
        .lines()
        .find(|line| {
            line.starts_with(&format!("{family}{{"))
                && line.contains(&format!("namespace=\"{ns}\""))
                && line.contains("name=\"app\"")
        })
        .and_then(|line| line.rsplit(' ').next())
        .map(str::to_string)
}

/// Sets (or with `null`, removes) annotation `key` of Kustomization `app`.
async fn annotate(client: &kube::Client, ns: &str, key: &str, value: Value) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate app");
}

/// In warn mode an edit is reported and left as it is across reconciles: Ready stays True,
/// the `Drifted` condition (which `kubectl wait` and `flux get --status-selector` read) names
/// the object and its writer, one Warning event tells the drift once, `diff` shows the field
/// and its writer, and the detection is counted with no correction. Switched back to
/// correcting, the Kustomization is reconciled at once and the edit reverted, the change set
/// naming who drifted the object.
#[tokio::test]
async fn warn_mode_reports_drift_and_leaves_it_until_drift_is_corrected_again() {
    let f = Fixture::new("drift-warn").await;
    let ns = f.ns();
    one_config_map(&f, json!({DETECT: "warn"})).await;
    let no_drift = drifted_condition(&f.client, ns).await;
    assert_eq!(
        no_drift.as_ref().map(|(s, r, _)| (s.as_str(), r.as_str())),
        Some(("False", "NoDrift")),
        "{no_drift:?}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    edit(&config_maps).await;
    for run in 0..2 {
        let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
        assert_eq!(status, ConditionStatus::True, "run {run}: {message}");
        assert_eq!(
            value_of(&config_maps, "a").await.as_deref(),
            Some("edited"),
            "run {run} left the edit"
        );
    }
    let object = format!("ConfigMap/{ns}/a changed by kubectl-edit");
    wait_drifted(&f.client, ns, &object).await;
    let reports = drift_reports(&f.client, ns).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(
        reports[0].1, 1,
        "told once, not once per reconcile: {reports:?}"
    );
    assert!(
        reports[0].0.ends_with(&format!("\n{object}: .data.value")),
        "{reports:?}"
    );

    let waited = support::kubectl()
        .args([
            "wait",
            "--for=condition=Drifted",
            "kustomization/app",
            "-n",
            ns,
        ])
        .args(["--timeout=10s"])
        .output()
        .expect("run kubectl wait");
    assert!(waited.status.success(), "{waited:?}");
    let listed = Command::new(super::flux_cli::flux_binary())
        .args(["get", "kustomizations", "--status-selector", "drifted=true"])
        .args(["-n", ns, "--kubeconfig"])
        .arg(support::kubeconfig_path())
        .output()
        .expect("run flux get");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.lines().any(|line| line.starts_with("app ")),
        "{listed}"
    );

    let local = super::diff::local_dir(&[("deploy/a.yaml".into(), config_map(ns, "a", "1"))]);
    let shown = super::diff::diff_exiting(ns, &local, &support::kubeconfig_path(), 1);
    assert!(
        shown.starts_with(&format!(
            "► ConfigMap/{ns}/a drifted\n  .data.value (kubectl-edit)\n"
        )),
        "{shown}"
    );
    assert_eq!(
        metric("gotk_drift_detected_total", ns).as_deref(),
        Some("1")
    );
    assert_eq!(metric("gotk_drift_corrections_total", ns), None);

    annotate(&f.client, ns, DETECT, Value::Null).await;
    wait_restored(&config_maps, "the edit to be reverted in correcting mode").await;
    wait_for(
        WAIT,
        "the Drifted condition to go",
        async || match drifted_condition(&f.client, ns).await {
            None => Ok(()),
            Some(other) => Err(format!("{other:?}")),
        },
    )
    .await;
    // Back in Flux's mode, the change set is Flux's to the byte.
    let corrected = format!("ConfigMap/{ns}/a configured");
    let events = kustomization_events(&f.client, ns, "app").await;
    assert!(
        events.iter().any(|e| e.message == corrected),
        "{:?}",
        events.iter().map(|e| &e.message).collect::<Vec<_>>()
    );
}

/// In warn mode a new revision is applied as ever, drift included, and objects new to the
/// inventory are created: nothing is left drifted.
#[tokio::test]
async fn a_new_revision_in_warn_mode_is_applied() {
    let f = Fixture::new("drift-warn-revision").await;
    let ns = f.ns();
    one_config_map(&f, json!({DETECT: "warn"})).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    edit(&config_maps).await;
    reconcile_now(&f.client, ns, "app", controller()).await;
    wait_drifted(&f.client, ns, &format!("ConfigMap/{ns}/a changed")).await;

    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "2")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    )
    .await;
    super::apply::wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    assert_eq!(value_of(&config_maps, "a").await.as_deref(), Some("2"));
    assert_eq!(value_of(&config_maps, "b").await.as_deref(), Some("1"));
    let drifted = drifted_condition(&f.client, ns).await;
    assert_eq!(
        drifted.as_ref().map(|(s, r, _)| (s.as_str(), r.as_str())),
        Some(("False", "NoDrift")),
        "{drifted:?}"
    );
}

/// With prompt correction and warn mode, a write reconciles the Kustomization as promptly,
/// and that reconcile reports the drift without correcting it; a deletion is reported and the
/// object not recreated until drift is corrected again.
#[tokio::test]
async fn the_prompt_path_in_warn_mode_reports_without_correcting() {
    let f = Fixture::new("drift-warn-prompt").await;
    let ns = f.ns();
    one_config_map(&f, json!({PROMPT: "prompt", DETECT: "warn"})).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    edit(&config_maps).await;
    wait_edit_reported(&f.client, ns).await;
    assert_eq!(value_of(&config_maps, "a").await.as_deref(), Some("edited"));
    let status = kustomization_status_json(&f.client, ns).await;
    assert!(status["lastHandledReconcileAt"].is_null(), "{status:#}");
    let reporting = drift_lines_in(ns, "reporting");
    assert!(reporting >= 1, "{}", tail(&controller().log(), 20));
    assert_eq!(corrections_in(ns), 0);

    config_maps
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    wait_drifted(&f.client, ns, &format!("ConfigMap/{ns}/a deleted")).await;
    assert_eq!(value_of(&config_maps, "a").await, None, "left deleted");
    assert_eq!(drift_reports(&f.client, ns).await.len(), 2);
    assert_eq!(corrections_in(ns), 0);
    assert_eq!(metric("gotk_drift_corrections_total", ns), None);

    annotate(&f.client, ns, DETECT, json!("enabled")).await;
    wait_restored(&config_maps, "the deleted object to be recreated").await;
}

/// Periodic runs in warn mode (which reuse the last build when nobody wrote an object) keep
/// the drift reported: a drifted object is not recorded as applied, so no run reuses a build
/// over it; the drift is told once however many runs find it.
#[tokio::test]
async fn periodic_runs_in_warn_mode_keep_the_drift_reported_and_tell_it_once() {
    let f = Fixture::new("drift-warn-periodic").await;
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    )
    .await;
    create_app(&f, json!({DETECT: "warn"}), json!({"interval": "2s"})).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    edit(&config_maps).await;
    wait_edit_reported(&f.client, ns).await;
    let runs = async || {
        kustomization_status_json(&f.client, ns).await["history"][0]["totalReconciliations"]
            .as_i64()
            .unwrap_or(0)
    };
    let first = runs().await;
    wait_for(WAIT, "three more periodic runs", async || {
        let count = runs().await;
        if count >= first + 3 {
            Ok(())
        } else {
            Err(format!("{count} runs"))
        }
    })
    .await;
    wait_edit_reported(&f.client, ns).await;
    assert_eq!(value_of(&config_maps, "a").await.as_deref(), Some("edited"));
    let reports = drift_reports(&f.client, ns).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].1, 1, "{reports:?}");
    assert_eq!(
        metric("gotk_drift_detected_total", ns).as_deref(),
        Some("1")
    );
}
