//! Events forwarded to `--events-addr` over HTTPS, end to end: the `events` shard's controller
//! posts to a local receiver whose certificate is signed by a CA the test makes and hands to
//! the controller as `SSL_CERT_FILE` (as one would for Flux's Go binary). Every post is
//! decoded with fluxcd/pkg apis/event v1's schema (`support/event_receiver.rs`); the action
//! and related object of each stage are those kustomize-controller v1.10.1 sends.

use super::support::event_receiver::{EventSeverity, FluxEvent, Receiver, TestCa};
use super::*;

const SHARD: &str = "events";

struct EventsController {
    _process: ControllerProcess,
    receiver: Receiver,
    _ca: TestCa,
}

fn events_controller() -> &'static EventsController {
    static CONTROLLER: OnceLock<EventsController> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let ca = TestCa::new();
        let receiver = Receiver::https(&ca);
        let process = start_controller_binary_with_env(
            SHARD,
            std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
            &[
                &format!(
                    "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={SHARD}",
                    run_id()
                ),
                &format!("--events-addr={}", receiver.url("localhost")),
            ],
            &[("SSL_CERT_FILE", ca.ca_pem.display().to_string())],
        );
        EventsController {
            _process: process,
            receiver,
            _ca: ca,
        }
    })
}

/// The events received about Kustomizations in `ns`, in the order they came.
fn events_in(ns: &str) -> Vec<FluxEvent> {
    events_controller()
        .receiver
        .events()
        .into_iter()
        .filter(|e| e.involved_object.namespace.as_deref() == Some(ns))
        .collect()
}

/// Waits for an event on `name` with `action` and `severity`, and returns it.
async fn wait_event(ns: &str, name: &str, action: &str, severity: EventSeverity) -> FluxEvent {
    wait_for(
        WAIT,
        &format!("a {severity:?} {action} event on {name}"),
        async || {
            let events = events_in(ns);
            events
                .iter()
                .find(|e| {
                    e.involved_object.name.as_deref() == Some(name)
                        && e.action == action
                        && e.severity == severity
                })
                .cloned()
                .ok_or_else(|| {
                    let seen: Vec<String> = events
                        .iter()
                        .map(|e| {
                            format!("{:?} {} {} {}", e.severity, e.action, e.reason, e.message)
                        })
                        .collect();
                    seen.join("\n")
                })
        },
    )
    .await
}

async fn uid_of_repo(client: &kube::Client, ns: &str) -> String {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &artifacts::git_repository_resource())
        .get("repo")
        .await
        .expect("the GitRepository")
        .metadata
        .uid
        .expect("a uid")
}

#[tokio::test]
async fn events_reach_an_https_receiver_with_fluxs_action_and_related_source() {
    let controller = events_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "events-https").await;
    let ns = ns.name();
    create_git_source(&client, ns, "repo").await;
    let repo_uid = uid_of_repo(&client, ns).await;
    create_labelled_kustomization(
        &client,
        ns,
        "app",
        "repo",
        json!({"wait": true}),
        json!({SHARD_LABEL: SHARD}),
    )
    .await;
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {
                "event.toolkit.fluxcd.io/token": "t-1"}}})),
        )
        .await
        .expect("annotate the Kustomization");
    // Published once the token is on the Kustomization: the run it starts carries it.
    let revision = publish(
        &client,
        ns,
        "repo",
        1,
        &[("deploy/cm.yaml", config_map(ns, "a", "1"))],
    )
    .await;

    let related = |event: &FluxEvent| {
        let related = event
            .related_object
            .clone()
            .unwrap_or_else(|| panic!("no relatedObject on {event:?}"));
        (
            related.kind,
            related.api_version,
            related.namespace,
            related.name,
            related.uid,
        )
    };
    let the_repo = (
        Some("GitRepository".to_string()),
        Some("source.toolkit.fluxcd.io/v1".to_string()),
        Some(ns.to_string()),
        Some("repo".to_string()),
        Some(repo_uid.clone()),
    );

    // Apply, health check and success, each with its stage and the source.
    let apply = wait_event(ns, "app", "Apply", EventSeverity::Info).await;
    assert_eq!(apply.reason, "Progressing");
    assert_eq!(apply.message, format!("ConfigMap/{ns}/a created"));
    assert_eq!(related(&apply), the_repo);
    let health = wait_event(ns, "app", "HealthCheck", EventSeverity::Info).await;
    assert!(
        health.message.starts_with("Health check passed in "),
        "{health:?}"
    );
    assert_eq!(related(&health), the_repo);
    let done = wait_event(ns, "app", "Reconcile", EventSeverity::Info).await;
    assert_eq!(done.reason, "ReconciliationSucceeded");
    assert_eq!(related(&done), the_repo);
    let metadata = done.metadata.clone().unwrap_or_default();
    assert_eq!(
        metadata.get("kustomize.toolkit.fluxcd.io/revision"),
        Some(&revision)
    );
    assert_eq!(
        metadata
            .get("kustomize.toolkit.fluxcd.io/commit_status")
            .map(String::as_str),
        Some("update")
    );
    assert_eq!(
        metadata
            .get("event.toolkit.fluxcd.io/token")
            .map(String::as_str),
        Some("t-1")
    );
    let involved = &done.involved_object;
    assert_eq!(
        (
            involved.kind.as_deref(),
            involved.api_version.as_deref(),
            involved.name.as_deref()
        ),
        (
            Some("Kustomization"),
            Some("kustomize.toolkit.fluxcd.io/v1"),
            Some("app")
        )
    );
    assert!(involved.uid.is_some() && involved.resource_version.is_some());
    assert_eq!(done.reporting_controller, "kustomize-controller");
    assert!(
        done.reporting_instance
            .as_deref()
            .is_some_and(|i| !i.is_empty()),
        "{done:?}"
    );

    // A dependency that does not exist: informational, CheckDependencies, with the source.
    create_labelled_kustomization(
        &client,
        ns,
        "dependent",
        "repo",
        json!({"dependsOn": [{"name": "missing"}]}),
        json!({SHARD_LABEL: SHARD}),
    )
    .await;
    let waiting = wait_event(ns, "dependent", "CheckDependencies", EventSeverity::Info).await;
    assert!(
        waiting
            .message
            .starts_with("Dependencies do not meet ready condition"),
        "{waiting:?}"
    );
    assert_eq!(related(&waiting), the_repo);

    // A failing build: an error about the whole reconcile, still naming the source.
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"path": "./missing"}})),
        )
        .await
        .expect("break the path");
    let failed = wait_event(ns, "app", "Reconcile", EventSeverity::Error).await;
    assert!(failed.message.contains("missing"), "{failed:?}");
    assert_eq!(related(&failed), the_repo);

    // Deletion: Finalize, without a source (Flux does not read it for a deleted object).
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete the Kustomization");
    let finalized = wait_event(ns, "app", "Finalize", EventSeverity::Info).await;
    assert_eq!(finalized.message, format!("ConfigMap/{ns}/a deleted"));
    assert_eq!(finalized.related_object, None);

    // Every post, this test's or not, decoded with the strict schema.
    let all = controller.receiver.received();
    assert!(
        all.iter().all(|r| r.event.is_ok()),
        "{:?}",
        all.iter().find(|r| r.event.is_err())
    );
    assert!(
        all.iter()
            .all(|r| r.headers.get("content-type").map(String::as_str) == Some("application/json"))
    );
}
