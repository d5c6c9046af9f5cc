//! `spec.dependsOn` end to end. The Kustomizations here are reconciled by the `deps` shard,
//! whose controller re-checks waiting dependents only every hour (`--requeue-dependency=1h`):
//! whatever becomes Ready within a test's wait was woken by the watch when its dependency
//! became ready, not by that requeue.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::watcher;
use tokio::time::timeout;

use super::*;

const SHARD: &str = "deps";

fn deps_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_controller(
            SHARD,
            &[
                &format!(
                    "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={SHARD}",
                    run_id()
                ),
                "--requeue-dependency=1h",
            ],
        )
    })
}

/// A namespace with a GitRepository `repo` whose artifact holds one ConfigMap per directory
/// in `dirs` (`<dir>/cm.yaml`, the ConfigMap named after the directory).
async fn fixture(test: &str, dirs: &[&str]) -> (kube::Client, TestNamespace) {
    deps_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, test).await;
    create_git_source(&client, ns.name(), "repo").await;
    let files: Vec<(String, String)> = dirs
        .iter()
        .map(|dir| (format!("{dir}/cm.yaml"), config_map(ns.name(), dir, "1")))
        .collect();
    publish(&client, ns.name(), "repo", 1, &files).await;
    (client, ns)
}

/// A Kustomization of `./<name>` in the `deps` shard, with `extra` spec fields.
async fn create(client: &kube::Client, ns: &str, name: &str, extra: Value) {
    let mut spec = json!({"path": format!("./{name}")});
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    create_labelled_kustomization(client, ns, name, "repo", spec, json!({SHARD_LABEL: SHARD}))
        .await;
}

async fn condition(
    client: &kube::Client,
    ns: &str,
    name: &str,
    type_: &str,
) -> Option<kustomize_controller::api::condition::Condition> {
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .ok()?
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == type_)
}

async fn wait_for_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    expected: ConditionStatus,
    reason: &str,
) -> String {
    wait_for(
        WAIT,
        &format!("{name} Ready={expected:?} {reason}"),
        async || match condition(client, ns, name, "Ready").await {
            Some(c) if c.status == expected && c.reason == reason => Ok(c.message),
            other => Err(format!("{other:?}")),
        },
    )
    .await
}

/// Watches `api` from now on (its initial list done when this returns) and answers, for
/// each object named in `names`, the resourceVersion at which it was first seen to hold
/// `first`. The API server's resourceVersions are etcd's revisions, one count across every
/// kind: they order writes exactly, where timestamps have whole seconds.
async fn first_revisions<K>(
    api: Api<K>,
    names: &[&str],
    first: fn(&K) -> bool,
) -> tokio::task::JoinHandle<BTreeMap<String, u64>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(watcher::Event::InitDone)) => break,
            Ok(Some(_)) => {}
            other => panic!("starting a watch: {other:?}"),
        }
    }
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    tokio::spawn(async move {
        let mut seen = BTreeMap::new();
        while seen.len() < names.len() {
            let object = match stream.try_next().await {
                Ok(Some(watcher::Event::Apply(object) | watcher::Event::InitApply(object))) => {
                    object
                }
                Ok(Some(_)) | Err(_) => continue,
                Ok(None) => break,
            };
            let name = object.meta().name.clone().unwrap_or_default();
            if names.contains(&name) && !seen.contains_key(&name) && first(&object) {
                let version = object
                    .meta()
                    .resource_version
                    .as_deref()
                    .unwrap_or_default();
                let revision = version.parse::<u64>().unwrap_or_else(|e| {
                    panic!("{name}: resourceVersion {version:?} is not a revision: {e}")
                });
                seen.insert(name, revision);
            }
        }
        seen
    })
}

#[tokio::test]
async fn a_chain_created_at_once_is_applied_in_order_woken_by_its_dependencies() {
    let levels = ["infra-controllers", "infra-configs", "apps"];
    let (client, ns) = fixture("deps-chain", &levels).await;
    let ns = ns.name();
    let ready_at = first_revisions(
        Api::<Kustomization>::namespaced(client.clone(), ns),
        &levels,
        |ks| {
            ks.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == ConditionStatus::True)
        },
    )
    .await;
    let created_at = first_revisions(
        Api::<ConfigMap>::namespaced(client.clone(), ns),
        &levels,
        |_| true,
    )
    .await;
    // All at once, the last first.
    create(
        &client,
        ns,
        "apps",
        json!({"dependsOn": [{"name": "infra-configs"}]}),
    )
    .await;
    create(
        &client,
        ns,
        "infra-configs",
        json!({"dependsOn": [{"name": "infra-controllers", "namespace": ns}]}),
    )
    .await;
    create(&client, ns, "infra-controllers", json!({"wait": true})).await;

    for level in levels {
        wait_for_ready(
            &client,
            ns,
            level,
            ConditionStatus::True,
            "ReconciliationSucceeded",
        )
        .await;
    }
    // Each level's objects were created once the level before was Ready: the write that
    // created its ConfigMap comes after the write that made the level before Ready.
    let ready_at = timeout(WAIT, ready_at)
        .await
        .expect("every level seen Ready")
        .expect("the Kustomization watch");
    let created_at = timeout(WAIT, created_at)
        .await
        .expect("every ConfigMap seen")
        .expect("the ConfigMap watch");
    for pair in levels.windows(2) {
        let (ready, applied) = (ready_at[pair[0]], created_at[pair[1]]);
        assert!(
            applied > ready,
            "{} created at revision {applied}, before {} was Ready at revision {ready}",
            pair[1],
            pair[0]
        );
    }
    // `apps` had to wait, and said so as Flux does.
    let notes = event_notes(&client, ns, Some("apps")).await;
    assert!(
        notes
            .iter()
            .any(|(reason, note)| reason == "DependencyNotReady"
                && note == "Dependencies do not meet ready condition, retrying in 1h0m0s"),
        "{notes:?}"
    );
}

#[tokio::test]
async fn a_ready_expression_decides_and_is_re_evaluated_when_the_dependency_changes() {
    let (client, ns) = fixture("deps-expr", &["backend", "frontend"]).await;
    let ns = ns.name();
    create(&client, ns, "backend", json!({})).await;
    wait_for_ready(
        &client,
        ns,
        "backend",
        ConditionStatus::True,
        "ReconciliationSucceeded",
    )
    .await;
    // Requires a field of the dependency's status, and a label it does not have yet.
    let expression = "dep.status.lastAppliedRevision.startsWith('main@') && \
                      dep.metadata.labels[?'app/version'].orValue('') == 'v2'";
    create(
        &client,
        ns,
        "frontend",
        json!({"dependsOn": [{"name": "backend", "readyExpr": expression}]}),
    )
    .await;
    let message = wait_for_ready(
        &client,
        ns,
        "frontend",
        ConditionStatus::False,
        "DependencyNotReady",
    )
    .await;
    assert_eq!(
        message,
        format!("dependency '{ns}/backend' is not ready according to readyExpr eval")
    );
    let patch = json!({"metadata": {"labels": {"app/version": "v2"}}});
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch("backend", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label backend");
    wait_for_ready(
        &client,
        ns,
        "frontend",
        ConditionStatus::True,
        "ReconciliationSucceeded",
    )
    .await;

    // An expression that is not boolean is a configuration error.
    create(
        &client,
        ns,
        "broken",
        json!({"path": "./frontend", "dependsOn": [{"name": "backend", "readyExpr": "dep.status.lastAppliedRevision"}]}),
    )
    .await;
    let message = wait_for_ready(
        &client,
        ns,
        "broken",
        ConditionStatus::False,
        "InvalidCELExpression",
    )
    .await;
    assert_eq!(
        message,
        "Reconciliation failed terminally due to configuration error: terminal error: failed \
         to evaluate dependency backend: CEL expression output type mismatch: expected bool, \
         got dyn"
    );
    let stalled = condition(&client, ns, "broken", "Stalled")
        .await
        .expect("Stalled");
    assert_eq!(stalled.status, ConditionStatus::True);
}

#[tokio::test]
async fn a_missing_dependency_waits_until_it_exists() {
    let (client, ns) = fixture("deps-missing", &["app", "base"]).await;
    let ns = ns.name();
    create(&client, ns, "app", json!({"dependsOn": [{"name": "base"}]})).await;
    let message = wait_for_ready(
        &client,
        ns,
        "app",
        ConditionStatus::False,
        "DependencyNotReady",
    )
    .await;
    assert_eq!(
        message,
        format!(
            "dependency '{ns}/base' not found: kustomizations.kustomize.toolkit.fluxcd.io \"base\" not found"
        )
    );
    assert!(
        config_map_names(&client, ns).await.is_empty(),
        "nothing is applied before the dependency is ready"
    );
    let status = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get("app")
        .await
        .expect("app")
        .status
        .expect("status");
    assert_eq!(status.last_attempted_revision, None);
    create(&client, ns, "base", json!({})).await;
    wait_for_ready(
        &client,
        ns,
        "app",
        ConditionStatus::True,
        "ReconciliationSucceeded",
    )
    .await;
}

#[tokio::test]
async fn a_cycle_is_reported_on_every_member() {
    let (client, ns) = fixture("deps-cycle", &["a", "b"]).await;
    let ns = ns.name();
    create(&client, ns, "a", json!({"dependsOn": [{"name": "b"}]})).await;
    create(&client, ns, "b", json!({"dependsOn": [{"name": "a"}]})).await;
    for (name, other) in [("a", "b"), ("b", "a")] {
        let message = wait_for(
            WAIT,
            &format!("{name} reports the cycle"),
            async || match condition(&client, ns, name, "Ready").await {
                Some(c) if c.message.contains("dependency cycle detected") => Ok(c),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
        assert_eq!(message.status, ConditionStatus::False);
        assert_eq!(message.reason, "DependencyNotReady");
        assert_eq!(
            message.message,
            format!(
                "Reconciliation failed terminally due to configuration error: dependency cycle \
                 detected: {ns}/{name} -> {ns}/{other} -> {ns}/{name}"
            )
        );
        let stalled = condition(&client, ns, name, "Stalled")
            .await
            .expect("Stalled");
        assert_eq!(stalled.status, ConditionStatus::True);
    }
    // Breaking the cycle lets both through.
    let patch = json!({"spec": {"dependsOn": null}});
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch("b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("break the cycle");
    for name in ["b", "a"] {
        wait_for_ready(
            &client,
            ns,
            name,
            ConditionStatus::True,
            "ReconciliationSucceeded",
        )
        .await;
    }
}

#[tokio::test]
async fn cross_namespace_dependencies_are_denied_by_the_strict_controller() {
    strict_controller();
    let (client, ns) = fixture("deps-strict", &["app"]).await;
    let ns = ns.name();
    create_labelled_kustomization(
        &client,
        ns,
        "app",
        "repo",
        json!({"path": "./app", "dependsOn": [{"name": "infra", "namespace": "flux-system"}]}),
        json!({SHARD_LABEL: "strict"}),
    )
    .await;
    let (reason, message) =
        wait_ready_with(&client, ns, "app", ConditionStatus::False, "AccessDenied").await;
    assert_eq!(reason, "AccessDenied");
    assert_eq!(
        message,
        "can't access 'Kustomization/flux-system/infra', cross-namespace references have been blocked"
    );
    let stalled = condition(&client, ns, "app", "Stalled")
        .await
        .expect("Stalled");
    assert_eq!(stalled.reason, "AccessDenied");
}
