//! Build reuse: a periodic reconcile whose inputs are the last successful run's, none of whose
//! objects anybody wrote since, reuses that run's build; any input that changed builds again.

use super::apply::{kustomization_status, wait_applied};
use super::*;
use k8s_openapi::api::core::v1::Secret;

/// Whether the controller's log says that a periodic run of a Kustomization in `ns`
/// reused its last build.
pub(super) fn reused_in(ns: &str) -> bool {
    controller()
        .log()
        .lines()
        .map(without_colours)
        .any(|line| line.contains("its build is reused") && line.contains(ns))
}

/// `status.history[0].totalReconciliations` of Kustomization `app`.
async fn reconciles(client: &kube::Client, ns: &str) -> i64 {
    kustomization_status(client, ns, "app").await["history"][0]["totalReconciliations"]
        .as_i64()
        .unwrap_or(0)
}

/// Waits for `count` more periodic reconciles of Kustomization `app`.
pub(super) async fn wait_reconciles(client: &kube::Client, ns: &str, count: i64) {
    let first = reconciles(client, ns).await;
    wait_for(WAIT, "periodic reconciles", async || {
        let now = reconciles(client, ns).await;
        if now >= first + count {
            Ok(())
        } else {
            Err(format!("{now} reconciles, waiting for {}", first + count))
        }
    })
    .await;
}

/// Kustomization `app`, every 2 s, applying ConfigMap `out` whose value is `${value}` from
/// the `substituteFrom` object `vars` of `kind`; waits until it is applied.
async fn substituting_app(f: &Fixture, kind: &str) {
    let ns = f.ns();
    f.create_source("repo").await;
    let out = config_map(ns, "out", "${value}");
    f.publish(1, &[("deploy/out.yaml", &out)]).await;
    let spec = json!({
        "interval": "2s",
        "postBuild": {"substituteFrom": [{"kind": kind, "name": "vars"}]}
    });
    create_kustomization(&f.client, ns, "app", "repo", spec).await;
    wait_applied(&f.client, ns, "app", &f.revision(1), controller()).await;
}

/// A `substituteFrom` ConfigMap written between two periodic runs is an input that changed:
/// the next periodic run builds again and applies the new value, without anyone asking
/// (the ConfigMap is not labelled for the config watchers).
#[tokio::test]
async fn a_changed_variables_config_map_builds_again_at_the_next_interval() {
    let f = Fixture::new("reuse-vars").await;
    let ns = f.ns();
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    let vars: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "vars"},
        "data": {"value": "one"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &vars)
        .await
        .expect("create vars");
    substituting_app(&f, "ConfigMap").await;
    wait_reconciles(&f.client, ns, 2).await;
    assert!(reused_in(ns), "{}", tail(&controller().log(), 20));

    config_maps
        .patch(
            "vars",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "two"}})),
        )
        .await
        .expect("patch vars");
    wait_for(WAIT, "the new value applied", async || {
        let data = json!(config_maps.get("out").await.expect("get out").data);
        match data["value"].as_str() {
            Some("two") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let status = kustomization_status(&f.client, ns, "app").await;
    assert!(status["lastHandledReconcileAt"].is_null(), "{status:#}");
}

/// A build that read variables from a Secret is never reused (what it revealed must mask
/// every later message); its periodic runs build every time.
#[tokio::test]
async fn a_build_that_read_a_secret_is_built_every_time() {
    let f = Fixture::new("reuse-secret").await;
    let ns = f.ns();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "vars"},
        "stringData": {"value": "hidden"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create vars");
    substituting_app(&f, "Secret").await;
    wait_reconciles(&f.client, ns, 3).await;
    assert!(!reused_in(ns), "{}", tail(&controller().log(), 20));
    let built = controller().log().lines().map(without_colours).any(|line| {
        line.contains("without a request") && line.contains(ns) && line.contains("objects=1")
    });
    assert!(built, "{}", tail(&controller().log(), 20));
}
