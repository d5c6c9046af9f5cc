//! Health assessment end to end, on a cluster whose workloads really roll out
//! (kube-controller-manager, kube-scheduler and kwok's fake nodes): `spec.wait`,
//! `spec.healthChecks`, `spec.healthCheckExprs`, timeouts, failures and cancellation.

use std::process::Stdio;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kustomize_controller::api::{ConditionStatus, Kustomization};
use serde_json::{Value, json};

use super::support::{self, TestNamespace, wait_for};
use super::*;

/// A controller for the `cancel` shard, with `CancelHealthCheckOnNewRevision` on.
fn cancel_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_controller(
            "cancel",
            &[
                &format!(
                    "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}=cancel",
                    run_id()
                ),
                "--feature-gates=CancelHealthCheckOnNewRevision=true",
            ],
        )
    })
}

fn deployment(ns: &str, name: &str, replicas: u32, node_selector: Option<&str>) -> String {
    let selector = node_selector
        .map(|s| format!("      nodeSelector:\n        {s}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n{selector}      containers:\n      - name: app\n        image: registry.example/{name}:1\n"
    )
}

fn workloads(ns: &str) -> Vec<(String, String)> {
    let group = format!("{ns}.example.com");
    vec![
        (
            "deploy/deployment.yaml".into(),
            deployment(ns, "web", 2, None),
        ),
        (
            "deploy/statefulset.yaml".into(),
            format!(
                "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: {ns}\nspec:\n  serviceName: db\n  replicas: 1\n  selector:\n    matchLabels:\n      app: db\n  template:\n    metadata:\n      labels:\n        app: db\n    spec:\n      containers:\n      - name: db\n        image: registry.example/db:1\n"
            ),
        ),
        (
            "deploy/daemonset.yaml".into(),
            format!(
                "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: agent\n  template:\n    metadata:\n      labels:\n        app: agent\n    spec:\n      containers:\n      - name: agent\n        image: registry.example/agent:1\n"
            ),
        ),
        (
            "deploy/job.yaml".into(),
            format!(
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: registry.example/migrate:1\n"
            ),
        ),
        (
            "deploy/crd.yaml".into(),
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  names:\n    kind: Widget\n    listKind: WidgetList\n    plural: widgets\n    singular: widget\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources:\n      status: {{}}\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
            ),
        ),
        (
            "deploy/widget.yaml".into(),
            format!(
                "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: gear\n  namespace: {ns}\nspec:\n  size: 1\n"
            ),
        ),
    ]
}

/// Conditions of a Kustomization by type: (status, reason, message, lastTransitionTime).
async fn conditions(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Vec<(String, ConditionStatus, String, String, SystemTime)> {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("get Kustomization");
    ks.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let time = SystemTime::UNIX_EPOCH
                + Duration::from_secs(c.last_transition_time.0.as_second().max(0) as u64);
            (c.type_, c.status, c.reason, c.message, time)
        })
        .collect()
}

async fn condition(
    client: &kube::Client,
    ns: &str,
    name: &str,
    type_: &str,
) -> Option<(ConditionStatus, String, String, SystemTime)> {
    conditions(client, ns, name)
        .await
        .into_iter()
        .find(|c| c.0 == type_)
        .map(|c| (c.1, c.2, c.3, c.4))
}

async fn workloads_ready(client: &kube::Client, ns: &str) -> Result<(), String> {
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("web")
        .await
        .map_err(|e| e.to_string())?;
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let sts = Api::<StatefulSet>::namespaced(client.clone(), ns)
        .get("db")
        .await
        .map_err(|e| e.to_string())?;
    let sts_ready = sts
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let ds = Api::<DaemonSet>::namespaced(client.clone(), ns)
        .get("agent")
        .await
        .map_err(|e| e.to_string())?;
    let ds_status = ds.status.unwrap_or_default();
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .get("migrate")
        .await
        .map_err(|e| e.to_string())?;
    let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    if available == 2
        && sts_ready == 1
        && ds_status.desired_number_scheduled == 2
        && ds_status.number_ready == 2
        && succeeded == 1
    {
        Ok(())
    } else {
        Err(format!(
            "deployment available {available}/2, statefulset ready {sts_ready}/1, daemonset ready {}/{}, job succeeded {succeeded}",
            ds_status.number_ready, ds_status.desired_number_scheduled
        ))
    }
}

/// The latest Ready transition among the namespace's pods (second precision, as the API
/// server stores it).
async fn last_pod_ready(client: &kube::Client, ns: &str) -> SystemTime {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter_map(|pod| {
            pod.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")?
                .last_transition_time
        })
        .map(|t| SystemTime::UNIX_EPOCH + Duration::from_secs(t.0.as_second().max(0) as u64))
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[tokio::test]
async fn wait_becomes_ready_only_after_every_workload_and_custom_resource_is_ready() {
    let f = Fixture::new("health-wait").await;
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let files = workloads(ns);
    f.create_source("repo").await;
    f.publish(1, &files).await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({
            "wait": true,
            "timeout": "3m",
            "healthCheckExprs": [{
                "apiVersion": format!("{group}/v1"),
                "kind": "Widget",
                "current": "status.phase == 'Ready'",
                "failed": "status.phase == 'Failed'",
            }],
        }),
    )
    .await;

    // Every workload becomes ready on its own; the Widget waits for the test, which plays
    // its controller.
    wait_for(WAIT, "the workloads to become ready", async || {
        workloads_ready(&f.client, ns).await
    })
    .await;
    let mut kubectl_wait = support::kubectl()
        .args([
            "wait",
            "-n",
            ns,
            "kustomization/app",
            "--for=condition=ready",
            "--timeout=120s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubectl wait");
    let health_step = format!(
        "Running health checks for revision {} with a timeout of 3m0s",
        f.revision(1)
    );
    wait_for(WAIT, "the health check step", async || {
        match condition(&f.client, ns, "app", "Reconciling").await {
            Some((ConditionStatus::True, _, message, _)) if message == health_step => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ready = condition(&f.client, ns, "app", "Ready").await;
    assert!(
        matches!(ready, Some((ConditionStatus::Unknown, ref reason, _, _)) if reason == "Progressing"),
        "Ready while the Widget is not: {ready:?}"
    );
    let healthy = condition(&f.client, ns, "app", "Healthy").await;
    assert!(
        matches!(&healthy, Some((ConditionStatus::Unknown, reason, message, _)) if reason == "Progressing" && *message == health_step),
        "{healthy:?}"
    );
    assert!(
        kubectl_wait.try_wait().expect("kubectl wait").is_none(),
        "kubectl wait returned before the Widget was ready"
    );

    let widgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let widget_ready_at = SystemTime::now();
    Api::<DynamicObject>::namespaced_with(f.client.clone(), ns, &widgets)
        .patch_status(
            "gear",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .expect("the Widget becomes ready");

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "Ready after the Widget",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded");
    assert_eq!(message, format!("Applied revision: {}", f.revision(1)));
    let output = tokio::task::spawn_blocking(move || kubectl_wait.wait_with_output())
        .await
        .expect("join")
        .expect("kubectl wait output");
    assert!(
        output.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Ordering from the objects' own timestamps (whole seconds): Ready turned True no
    // earlier than the last pod became Ready and than the Widget was made ready.
    let (_, _, _, ready_at) = condition(&f.client, ns, "app", "Ready")
        .await
        .expect("Ready");
    let widget_second = SystemTime::UNIX_EPOCH
        + Duration::from_secs(
            widget_ready_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .expect("clock")
                .as_secs(),
        );
    assert!(
        ready_at >= widget_second,
        "Ready before the Widget was ready"
    );
    assert!(
        ready_at >= last_pod_ready(&f.client, ns).await,
        "Ready before the last pod"
    );
    let (status, reason, message, _) = condition(&f.client, ns, "app", "Healthy")
        .await
        .expect("Healthy");
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::True, "Succeeded")
    );
    assert!(message.starts_with("Health check passed in "), "{message}");
    assert!(
        condition(&f.client, ns, "app", "Reconciling")
            .await
            .is_none(),
        "Reconciling is removed on success"
    );
}

#[tokio::test]
async fn unhealthy_objects_fail_with_flux_messages_naming_each_of_them() {
    let f = Fixture::new("health-fail").await;
    let ns = f.ns();
    let elsewhere = TestNamespace::new(&f.client, "health-elsewhere").await;
    Api::<Deployment>::namespaced(f.client.clone(), elsewhere.name())
        .create(
            &PostParams::default(),
            &serde_yaml_from(&deployment(elsewhere.name(), "shared", 1, None)),
        )
        .await
        .expect("a Deployment in another namespace");
    f.create_source("repo").await;
    let stuck = deployment(ns, "stuck", 1, Some("kc-test/no-such-node: \"true\""));
    let failing_job = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: bad\n  namespace: {ns}\nspec:\n  backoffLimit: 0\n  template:\n    metadata:\n      labels:\n        pod-container-running-failed.stage.kwok.x-k8s.io: \"true\"\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: bad\n        image: registry.example/bad:1\n"
    );
    let settings = config_map(ns, "settings", "on");
    f.publish(
        1,
        &[
            ("stuck/deployment.yaml", &stuck),
            ("job/job.yaml", &failing_job),
            ("plain/settings.yaml", &settings),
        ],
    )
    .await;
    let health_check = |api_version: &str, kind: &str, name: &str, namespace: Option<&str>| {
        let mut check = json!({"apiVersion": api_version, "kind": kind, "name": name});
        if let Some(namespace) = namespace {
            check["namespace"] = json!(namespace);
        }
        check
    };
    let cases = [
        (
            "stuck",
            json!({"path": "./stuck", "wait": true, "timeout": "5s"}),
            format!("timeout waiting for: [Deployment/{ns}/stuck status: 'InProgress']"),
        ),
        (
            "failed-job",
            json!({"path": "./job", "wait": true, "timeout": "3m"}),
            format!("failed early due to stalled resources: [Job/{ns}/bad status: 'Failed']"),
        ),
        (
            "ghost",
            json!({"path": "./plain", "timeout": "4s",
                   "healthChecks": [health_check("apps/v1", "Deployment", "ghost", None)]}),
            format!("timeout waiting for: [Deployment/{ns}/ghost status: 'NotFound']"),
        ),
        (
            "unknown-kind",
            json!({"path": "./plain", "timeout": "4s",
                   "healthChecks": [health_check("example.com/v1", "Gizmo", "g", None)]}),
            format!(
                "timeout waiting for: [Gizmo/{ns}/g status: 'Unknown': no matches for kind \"Gizmo\" in group \"example.com\"]"
            ),
        ),
        (
            "not-boolean",
            json!({"path": "./plain", "timeout": "4s",
                   "healthChecks": [health_check("v1", "ConfigMap", "settings", None)],
                   "healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap", "current": "data.value"}]}),
            format!(
                "timeout waiting for: [ConfigMap/{ns}/settings status: 'Unknown': failed to evaluate CEL expression as boolean: 'data.value']"
            ),
        ),
    ];
    for (name, spec, _) in &cases {
        create_kustomization(&f.client, ns, name, "repo", spec.clone()).await;
    }
    create_kustomization(
        &f.client,
        ns,
        "other-namespace",
        "repo",
        json!({"path": "./plain", "timeout": "1m",
               "healthChecks": [health_check("apps/v1", "Deployment", "shared", Some(elsewhere.name()))]}),
    )
    .await;

    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    for (name, _, expected) in &cases {
        // One snapshot of a failed run's status: a retry that starts meanwhile turns the
        // conditions Unknown until its own health check ends.
        let status = wait_for(WAIT, &format!("{name}: Ready=False"), async || {
            let status = api
                .get(name)
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            let failed = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::False);
            if failed {
                Ok(status)
            } else {
                Err(format!("{:?}", status.conditions))
            }
        })
        .await;
        let of_type = |wanted: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == wanted)
                .map(|c| (c.status, c.reason.clone(), c.message.clone()))
        };
        let (_, reason, message) = of_type("Ready").expect("Ready");
        assert_eq!(reason, "HealthCheckFailed", "{name}: {message}");
        assert!(
            message.starts_with("health check failed after ")
                && message.ends_with(expected.as_str()),
            "{name}: {message}\nexpected to end with: {expected}"
        );
        let (healthy, reason, healthy_message) = of_type("Healthy").expect("Healthy");
        assert_eq!(
            (healthy, reason.as_str(), healthy_message.as_str()),
            (
                ConditionStatus::False,
                "HealthCheckFailed",
                expected.as_str()
            ),
            "{name}"
        );
        assert!(
            status.last_applied_revision.is_none(),
            "{name}: not applied as healthy"
        );
        assert!(
            !status
                .inventory
                .clone()
                .unwrap_or_default()
                .entries
                .is_empty(),
            "{name}: the inventory records what was applied"
        );
    }
    // A timeout under 30 s is raised to 30 s, as Flux's controller does.
    let (_, _, step, _) = condition(&f.client, ns, "stuck", "Reconciling")
        .await
        .expect("Reconciling after a failed health check");
    assert!(step.ends_with("with a timeout of 30s"), "{step}");
    let (reason, _) = wait_ready_with(
        &f.client,
        ns,
        "other-namespace",
        ConditionStatus::True,
        "a health check in another namespace",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded");

    wait_for(WAIT, "the health check failure event", async || {
        let notes = event_notes(&f.client, ns, Some("stuck")).await;
        if notes
            .iter()
            .any(|(reason, note)| reason == "HealthCheckFailed" && note.ends_with(&cases[0].2))
        {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;
}

#[tokio::test]
async fn a_new_revision_cancels_a_running_health_check() {
    cancel_controller();
    let f = Fixture::new("health-cancel").await;
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish(
        1,
        &[(
            "deploy/deployment.yaml",
            &deployment(ns, "web", 1, Some("kc-test/no-such-node: \"true\"")),
        )],
    )
    .await;
    create_labelled_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"wait": true, "timeout": "10m"}),
        json!({SHARD_LABEL: "cancel"}),
    )
    .await;
    wait_for(
        WAIT,
        "the health checks of revision 1",
        async || match condition(&f.client, ns, "app", "Reconciling").await {
            Some((_, _, message, _))
                if message.starts_with("Running health checks for revision") =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    f.publish(
        2,
        &[("deploy/deployment.yaml", &deployment(ns, "web", 1, None))],
    )
    .await;
    // Without cancellation the first wait would hold the Kustomization for 10 minutes.
    let (_, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "revision 2 applied after the cancelled wait",
    )
    .await;
    assert_eq!(message, format!("Applied revision: {}", f.revision(2)));
    let expected = format!(
        "Health checks canceled due to new reconciliation triggered by GitRepository/{ns}/repo"
    );
    wait_for(WAIT, "the cancellation event", async || {
        let notes = event_notes(&f.client, ns, None).await;
        if notes
            .iter()
            .any(|(reason, note)| reason == "HealthCheckCanceled" && *note == expected)
        {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;
}

fn serde_yaml_from<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    let value: Value = serde_saphyr::from_str(yaml).expect("yaml");
    serde_json::from_value(value).expect("object")
}
