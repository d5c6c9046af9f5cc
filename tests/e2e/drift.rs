//! Prompt drift correction (beyond Flux, off by default): with the annotation
//! `kustomize.toolkit.fluxcd.io/drift-correction: prompt`, a write by another manager to an
//! applied object is reverted seconds later, not at the next interval.

use super::apply::{kustomization_events, merge_patch_as, web_deployment};
use super::*;
use k8s_openapi::api::apps::v1::Deployment;

const PROMPT: &str = "kustomize.toolkit.fluxcd.io/drift-correction";

/// Lines of the controller's log saying that drift of a Kustomization in `ns` was detected.
fn corrections_in(ns: &str) -> usize {
    controller()
        .log()
        .lines()
        .map(without_colours)
        .filter(|line| line.contains("drift detected, correcting") && line.contains(ns))
        .count()
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
    let corrections = controller()
        .log()
        .lines()
        .map(without_colours)
        .filter(|line| line.contains("drift detected, correcting") && line.contains(ns))
        .count();
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
