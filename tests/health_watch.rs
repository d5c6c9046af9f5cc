//! The health waiter against the real cluster, in process: waits share one watch per kind and
//! namespace, learn of a rollout from it, and release it when they are done.

mod support;

use std::sync::Arc;
use std::time::Duration;

use apply::wait::{HealthWatches, Target, WaitError, WaitOptions};
use apply::{ObjectId, Resolver};
use fluxcel::HealthCheckExprs;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use support::{TestNamespace, wait_for};

fn deployment_target(ns: &str, name: &str) -> Target {
    Target {
        id: ObjectId {
            namespace: ns.into(),
            name: name.into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            version: "v1".into(),
        },
        min_generation: None,
    }
}

fn deployment(ns: &str, name: &str) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
            }
        }
    }))
    .expect("deployment")
}

fn options(timeout: Duration) -> WaitOptions {
    WaitOptions {
        timeout,
        fail_fast: true,
        jobs_with_ttl: Default::default(),
    }
}

#[tokio::test]
async fn waits_share_a_watch_follow_the_rollout_and_release_it() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "health-watch").await;
    let watches = Arc::new(HealthWatches::new(client.clone()));
    let exprs = HealthCheckExprs::new(&[]).expect("no expressions");

    // Two waits on Deployments that do not exist yet, in one namespace.
    let waits: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|name| {
            let watches = Arc::clone(&watches);
            let client = client.clone();
            let exprs = exprs.clone();
            let target = deployment_target(ns.name(), name);
            tokio::spawn(async move {
                let resolver = Resolver::new(client);
                watches
                    .wait(
                        &resolver,
                        &[target],
                        &exprs,
                        &options(Duration::from_secs(120)),
                        std::future::pending(),
                    )
                    .await
            })
        })
        .collect();
    wait_for(
        Duration::from_secs(30),
        "the shared watch",
        async || match watches.active() {
            1 => Ok(()),
            n => Err(n),
        },
    )
    .await;

    let api: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    for name in ["one", "two"] {
        api.create(&PostParams::default(), &deployment(ns.name(), name))
            .await
            .expect("create Deployment");
    }
    for wait in waits {
        let outcome = tokio::time::timeout(Duration::from_secs(120), wait)
            .await
            .expect("the rollout ends the wait")
            .expect("join");
        assert_eq!(outcome, Ok(()));
    }
    // The waits only returned once the Deployments were really available.
    for name in ["one", "two"] {
        let status = api.get(name).await.expect("get").status.expect("status");
        assert_eq!(status.available_replicas, Some(2), "{name}");
    }
    assert_eq!(
        watches.active(),
        0,
        "the watch is released with the last wait"
    );
}

#[tokio::test]
async fn a_missing_object_times_out_as_not_found_and_cancellation_stops_a_wait() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "health-watch-missing").await;
    let watches = HealthWatches::new(client.clone());
    let exprs = HealthCheckExprs::new(&[]).expect("no expressions");
    let resolver = Resolver::new(client.clone());
    let ghost = deployment_target(ns.name(), "ghost");

    let outcome = watches
        .wait(
            &resolver,
            std::slice::from_ref(&ghost),
            &exprs,
            &options(Duration::from_secs(2)),
            std::future::pending(),
        )
        .await;
    assert_eq!(
        outcome.unwrap_err().to_string(),
        format!(
            "timeout waiting for: [Deployment/{}/ghost status: 'NotFound']",
            ns.name()
        )
    );

    let outcome = watches
        .wait(
            &resolver,
            &[ghost],
            &exprs,
            &options(Duration::from_secs(600)),
            async { "GitRepository/flux-system/repo".to_string() },
        )
        .await;
    assert_eq!(
        outcome,
        Err(WaitError::Canceled("GitRepository/flux-system/repo".into()))
    );
    assert_eq!(watches.active(), 0);
}
