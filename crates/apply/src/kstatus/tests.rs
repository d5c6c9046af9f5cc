use super::*;
use serde_json::json;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

/// (case, object, status, message)
type Case = (&'static str, Value, Status, &'static str);

fn run(cases: Vec<Case>) {
    for (name, object, status, message) in cases {
        let got = compute(&object, now()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, Assessment::new(status, message), "{name}: {object}");
    }
}

fn meta() -> Value {
    json!({"name": "test", "namespace": "qual", "generation": 1})
}

#[test]
fn status_names() {
    let names: Vec<String> = [
        Status::InProgress,
        Status::Failed,
        Status::Current,
        Status::Terminating,
        Status::NotFound,
        Status::Unknown,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        names,
        [
            "InProgress",
            "Failed",
            "Current",
            "Terminating",
            "NotFound",
            "Unknown"
        ]
    );
}

#[test]
fn generic_properties() {
    run(vec![
        (
            "deletion timestamp wins over everything",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"generation": 2, "deletionTimestamp": "2024-05-01T11:00:00Z"},
                       "status": {"observedGeneration": 1}}),
            Status::Terminating,
            "Resource scheduled for deletion",
        ),
        (
            "empty deletion timestamp is ignored",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"deletionTimestamp": ""}}),
            Status::Current,
            "Resource is always ready",
        ),
        (
            "generation not observed",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "metadata": {"name": "test", "namespace": "qual", "generation": 2},
                       "status": {"observedGeneration": 1}}),
            Status::InProgress,
            "MyCR generation is 2, but latest observed generation is 1",
        ),
        (
            "generation not observed for a PodDisruptionBudget",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {"name": "test", "generation": 2},
                       "status": {"observedGeneration": 1}}),
            Status::InProgress,
            "PodDisruptionBudget generation is 2, but latest observed generation is 1",
        ),
        (
            "observedGeneration without generation is not compared",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "status": {"observedGeneration": 1}}),
            Status::Current,
            "Resource is current",
        ),
        (
            "Reconciling=True",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Ready", "status": "True"},
                           {"type": "Reconciling", "status": "True", "reason": "Progressing",
                            "message": "working on it"}]}}),
            Status::InProgress,
            "working on it",
        ),
        (
            "Stalled=True",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Stalled", "status": "True", "reason": "Broken",
                            "message": "it is broken"}]}}),
            Status::Failed,
            "it is broken",
        ),
        (
            "the first of Reconciling and Stalled decides",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Stalled", "status": "True", "message": "stalled"},
                           {"type": "Reconciling", "status": "True", "message": "reconciling"}]}}),
            Status::Failed,
            "stalled",
        ),
        (
            "Reconciling=False and Stalled=False say nothing",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Reconciling", "status": "False"},
                           {"type": "Stalled", "status": "False"}]}}),
            Status::Current,
            "Resource is current",
        ),
        (
            "Stalled overrides a kind's rule",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Stalled", "status": "True", "message": "nope"}]}}),
            Status::Failed,
            "nope",
        ),
    ]);
}

#[test]
fn ready_condition_and_unknown_kinds() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta()}),
            Status::Current,
            "Resource is current",
        ),
        (
            "Ready=True",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [{"type": "Ready", "status": "True",
                                                  "message": "All looks ok", "reason": "AllOk"}]}}),
            Status::Current,
            "Resource is Ready",
        ),
        (
            "Ready=False",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"observedGeneration": 1, "conditions": [
                           {"type": "Ready", "status": "False", "reason": "NotReadyYet",
                            "message": "waiting for the thing"}]}}),
            Status::InProgress,
            "waiting for the thing",
        ),
        (
            "Ready=Unknown",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Ready", "status": "Unknown", "message": "who knows"}]}}),
            Status::InProgress,
            "who knows",
        ),
        (
            "a Ready condition with another status is skipped",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [
                           {"type": "Ready", "status": "Maybe"},
                           {"type": "Ready", "status": "False", "message": "second"}]}}),
            Status::InProgress,
            "second",
        ),
        (
            "no Ready condition",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": meta(),
                       "status": {"conditions": [{"type": "SomeCondition", "status": "False"}]}}),
            Status::Current,
            "Resource is current",
        ),
        (
            "null status",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "status": null}),
            Status::Current,
            "Resource is current",
        ),
        (
            "null conditions and null condition entries",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "status": {"conditions": [null]}}),
            Status::Current,
            "Resource is current",
        ),
        (
            "an invalid apiVersion matches no kind rule",
            json!({"apiVersion": "a/b/c", "kind": "Secret"}),
            Status::Current,
            "Resource is current",
        ),
        (
            "a Deployment in another group is not a Deployment",
            json!({"apiVersion": "example.com/v1", "kind": "Deployment"}),
            Status::Current,
            "Resource is current",
        ),
        (
            "a non-object is current",
            json!("not an object"),
            Status::Current,
            "Resource is current",
        ),
    ]);
}

#[test]
fn always_ready_kinds() {
    run(vec![
        (
            "Secret",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta()}),
            Status::Current,
            "Resource is always ready",
        ),
        (
            "ConfigMap",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta()}),
            Status::Current,
            "Resource is always ready",
        ),
        (
            "CronJob without status",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta()}),
            Status::Current,
            "Resource is always ready",
        ),
        (
            "CronJob with null status",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(),
                       "status": null}),
            Status::Current,
            "Resource is always ready",
        ),
        (
            "PodDisruptionBudget observed",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": meta(), "status": {"observedGeneration": 1}}),
            Status::Current,
            "AllowedDisruptions has been computed.",
        ),
    ]);
}

#[test]
fn services() {
    run(vec![
        (
            "default type",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta()}),
            Status::Current,
            "Service is ready",
        ),
        (
            "NodePort",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(),
                       "spec": {"type": "NodePort"}}),
            Status::Current,
            "Service is ready",
        ),
        (
            "LoadBalancer with a cluster IP",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(),
                       "spec": {"type": "LoadBalancer", "clusterIP": "1.2.3.4"}}),
            Status::Current,
            "Service is ready",
        ),
        (
            "LoadBalancer without a cluster IP",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(),
                       "spec": {"type": "LoadBalancer"}}),
            Status::InProgress,
            "ClusterIP not set. Service type: LoadBalancer",
        ),
    ]);
}

#[test]
fn pvcs() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta()}),
            Status::InProgress,
            "PVC is not Bound. phase: unknown",
        ),
        (
            "pending",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta(),
                       "status": {"phase": "Pending"}}),
            Status::InProgress,
            "PVC is not Bound. phase: Pending",
        ),
        (
            "bound",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta(),
                       "status": {"phase": "Bound"}}),
            Status::Current,
            "PVC is Bound",
        ),
    ]);
}

fn pod(status: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(), "status": status})
}

fn pending_unschedulable(created: Option<&str>) -> Value {
    let mut metadata = meta();
    if let Some(created) = created {
        metadata["creationTimestamp"] = json!(created);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
               "status": {"phase": "Pending", "conditions": [
                   {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
}

#[test]
fn pods() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta()}),
            Status::InProgress,
            "Pod phase not available",
        ),
        (
            "running and ready",
            pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})),
            Status::Current,
            "Pod is Ready",
        ),
        (
            "succeeded",
            pod(json!({"phase": "Succeeded", "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted"}]})),
            Status::Current,
            "Pod has completed successfully",
        ),
        (
            "failed",
            pod(json!({"phase": "Failed", "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted"}]})),
            Status::Current,
            "Pod has completed, but not successfully",
        ),
        (
            "running, not ready",
            pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})),
            Status::InProgress,
            "Pod is running but is not Ready",
        ),
        (
            "crash looping",
            pod(json!({"phase": "Running",
                           "conditions": [{"type": "PodScheduled", "status": "False",
                                           "reason": "Unschedulable"}],
                           "containerStatuses": [
                               {"name": "nginx", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                               {"name": "ok", "state": {"running": {}}},
                               {"name": "pulling", "state": {"waiting": {"reason": "ErrImagePull"}}},
                               {"state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                               {"name": "sidecar", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})),
            Status::Failed,
            "Containers in CrashLoop state: nginx,sidecar",
        ),
        (
            "ready wins over crash looping",
            pod(json!({"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "True"}],
                           "containerStatuses": [
                               {"name": "nginx", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})),
            Status::Current,
            "Pod is Ready",
        ),
        (
            "pending",
            pod(json!({"phase": "Pending"})),
            Status::InProgress,
            "Pod is in the Pending phase",
        ),
        (
            "pending, scheduling failed for another reason",
            pod(json!({"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]})),
            Status::InProgress,
            "Pod is in the Pending phase",
        ),
        (
            "being scheduled (created now)",
            pending_unschedulable(Some("2024-05-01T12:00:00Z")),
            Status::InProgress,
            "Pod has not been scheduled",
        ),
        (
            "being scheduled (created 14 s ago)",
            pending_unschedulable(Some("2024-05-01T11:59:46Z")),
            Status::InProgress,
            "Pod has not been scheduled",
        ),
        (
            "unschedulable (created exactly 15 s ago)",
            pending_unschedulable(Some("2024-05-01T11:59:45Z")),
            Status::Failed,
            "Pod could not be scheduled",
        ),
        (
            "unschedulable (created long ago)",
            pending_unschedulable(Some("2024-04-01T00:00:00Z")),
            Status::Failed,
            "Pod could not be scheduled",
        ),
        (
            "unschedulable (no creationTimestamp)",
            pending_unschedulable(None),
            Status::Failed,
            "Pod could not be scheduled",
        ),
        (
            "unschedulable (invalid creationTimestamp)",
            pending_unschedulable(Some("yesterday")),
            Status::Failed,
            "Pod could not be scheduled",
        ),
    ]);
}

fn sts(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta(),
               "spec": spec, "status": status})
}

#[test]
fn stateful_sets() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta()}),
            Status::InProgress,
            "Replicas: 0/1",
        ),
        (
            "bad status",
            sts(
                json!({}),
                json!({"observedGeneration": 1, "currentReplicas": 1}),
            ),
            Status::InProgress,
            "Replicas: 0/1",
        ),
        (
            "ok",
            sts(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "currentReplicas": 4, "readyReplicas": 4,
                           "replicas": 4}),
            ),
            Status::Current,
            "All replicas scheduled as expected. Replicas: 4",
        ),
        (
            "less ready",
            sts(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "currentReplicas": 4, "readyReplicas": 2,
                           "replicas": 4}),
            ),
            Status::InProgress,
            "Ready: 2/4",
        ),
        (
            "less current",
            sts(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "currentReplicas": 2, "readyReplicas": 4,
                           "replicas": 4}),
            ),
            Status::InProgress,
            "current: 2/4",
        ),
        (
            "extra pods",
            sts(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "currentReplicas": 4, "readyReplicas": 4,
                           "replicas": 8}),
            ),
            Status::InProgress,
            "Pending termination: 4",
        ),
        (
            "OnDelete",
            sts(
                json!({"replicas": 4, "updateStrategy": {"type": "OnDelete"}}),
                json!({}),
            ),
            Status::Current,
            "StatefulSet is using the ondelete update strategy",
        ),
        (
            "partition rolling out",
            sts(
                json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2}}}),
                json!({"readyReplicas": 4, "replicas": 4, "updatedReplicas": 1}),
            ),
            Status::InProgress,
            "updated: 1/2",
        ),
        (
            "partition rolled out",
            sts(
                json!({"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2}}}),
                json!({"readyReplicas": 4, "replicas": 4, "updatedReplicas": 2,
                           "currentRevision": "a", "updateRevision": "b"}),
            ),
            Status::Current,
            "Partition rollout complete. updated: 2",
        ),
        (
            "revision mismatch",
            sts(
                json!({"replicas": 2}),
                json!({"readyReplicas": 2, "replicas": 2, "currentReplicas": 2,
                           "currentRevision": "a", "updateRevision": "b"}),
            ),
            Status::InProgress,
            "Waiting for updated revision to match current",
        ),
        (
            "float and string replicas fall back to the defaults",
            sts(
                json!({"replicas": 3.0}),
                json!({"readyReplicas": "1", "replicas": 1, "currentReplicas": 1}),
            ),
            Status::InProgress,
            "Ready: 0/1",
        ),
    ]);
}

fn ds(metadata: Value, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata,
               "status": status})
}

#[test]
fn daemon_sets() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta()}),
            Status::InProgress,
            "DaemonSet status.observedGeneration not found",
        ),
        (
            "no generation",
            ds(json!({"name": "test"}), json!({"observedGeneration": 1})),
            Status::InProgress,
            "DaemonSet metadata.generation not found",
        ),
        (
            "bad status",
            ds(
                meta(),
                json!({"observedGeneration": 1, "currentReplicas": 1}),
            ),
            Status::InProgress,
            "Missing .status.desiredNumberScheduled",
        ),
        (
            "ok",
            ds(
                meta(),
                json!({"desiredNumberScheduled": 4, "currentNumberScheduled": 4,
                           "updatedNumberScheduled": 4, "numberAvailable": 4,
                           "numberReady": 4, "observedGeneration": 1}),
            ),
            Status::Current,
            "All replicas scheduled as expected. Replicas: 4",
        ),
        (
            "different generation",
            ds(
                json!({"name": "test", "generation": 2}),
                json!({"desiredNumberScheduled": 4, "currentNumberScheduled": 4,
                           "updatedNumberScheduled": 4, "numberAvailable": 4,
                           "numberReady": 4, "observedGeneration": 1}),
            ),
            Status::InProgress,
            "DaemonSet generation is 2, but latest observed generation is 1",
        ),
        (
            "less current",
            ds(
                meta(),
                json!({"observedGeneration": 1, "desiredNumberScheduled": 4,
                           "currentNumberScheduled": 3}),
            ),
            Status::InProgress,
            "Current: 3/4",
        ),
        (
            "less updated",
            ds(
                meta(),
                json!({"observedGeneration": 1, "desiredNumberScheduled": 4,
                           "currentNumberScheduled": 4, "updatedNumberScheduled": 1}),
            ),
            Status::InProgress,
            "Updated: 1/4",
        ),
        (
            "less available",
            ds(
                meta(),
                json!({"observedGeneration": 1, "desiredNumberScheduled": 4,
                           "currentNumberScheduled": 4, "updatedNumberScheduled": 4,
                           "numberAvailable": 2, "numberReady": 4}),
            ),
            Status::InProgress,
            "Available: 2/4",
        ),
        (
            "less ready",
            ds(
                meta(),
                json!({"observedGeneration": 1, "desiredNumberScheduled": 4,
                           "currentNumberScheduled": 4, "updatedNumberScheduled": 4,
                           "numberAvailable": 4, "numberReady": 2}),
            ),
            Status::InProgress,
            "Ready: 2/4",
        ),
        (
            "extensions group",
            json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet",
                       "metadata": meta()}),
            Status::InProgress,
            "DaemonSet status.observedGeneration not found",
        ),
    ]);
}

fn deploy(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
               "spec": spec, "status": status})
}

fn replicas(n: i64) -> Value {
    json!({"observedGeneration": 1, "replicas": n, "updatedReplicas": n,
               "readyReplicas": n, "availableReplicas": n})
}

fn with_conditions(mut status: Value, conditions: Value) -> Value {
    status["conditions"] = conditions;
    status
}

#[test]
fn deployments() {
    let ok_conditions = json!([
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            {"type": "Available", "status": "True"}]);
    run(vec![
        (
            "no status",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta()}),
            Status::InProgress,
            "Replicas: 0/1",
        ),
        (
            "ok",
            deploy(
                json!({}),
                with_conditions(replicas(1), ok_conditions.clone()),
            ),
            Status::Current,
            "Deployment is available. Replicas: 1",
        ),
        (
            "ok with two replicas",
            deploy(
                json!({"replicas": 2, "progressDeadlineSeconds": 600}),
                with_conditions(replicas(2), ok_conditions.clone()),
            ),
            Status::Current,
            "Deployment is available. Replicas: 2",
        ),
        (
            "not progressing",
            deploy(
                json!({"progressDeadlineSeconds": 45}),
                with_conditions(
                    replicas(1),
                    json!([{"type": "Progressing", "status": "False", "reason": "Some reason"},
                               {"type": "Available", "status": "True"}]),
                ),
            ),
            Status::InProgress,
            "ReplicaSet not Available",
        ),
        (
            "no progressDeadlineSeconds",
            deploy(
                json!({}),
                with_conditions(
                    replicas(1),
                    json!([{"type": "Available", "status": "True"}]),
                ),
            ),
            Status::Current,
            "Deployment is available. Replicas: 1",
        ),
        (
            "not available",
            deploy(
                json!({}),
                with_conditions(
                    replicas(1),
                    json!([{"type": "Progressing", "status": "True",
                                "reason": "NewReplicaSetAvailable"},
                               {"type": "Available", "status": "False"}]),
                ),
            ),
            Status::InProgress,
            "Deployment not Available",
        ),
        (
            "progress deadline exceeded",
            deploy(
                json!({"replicas": 3}),
                with_conditions(
                    json!({"replicas": 1}),
                    json!([{"type": "Progressing", "status": "False",
                                "reason": "ProgressDeadlineExceeded"}]),
                ),
            ),
            Status::Failed,
            "Progress deadline exceeded",
        ),
        (
            "too few replicas",
            deploy(json!({"replicas": 3}), replicas(2)),
            Status::InProgress,
            "Replicas: 2/3",
        ),
        (
            "too few updated",
            deploy(
                json!({"replicas": 3}),
                json!({"replicas": 3, "updatedReplicas": 1}),
            ),
            Status::InProgress,
            "Updated: 1/3",
        ),
        (
            "pending termination",
            deploy(
                json!({"replicas": 2}),
                json!({"replicas": 3, "updatedReplicas": 2}),
            ),
            Status::InProgress,
            "Pending termination: 1",
        ),
        (
            "too few available",
            deploy(
                json!({"replicas": 2}),
                json!({"replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}),
            ),
            Status::InProgress,
            "Available: 1/2",
        ),
        (
            "too few ready",
            deploy(
                json!({"replicas": 2}),
                json!({"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
                           "readyReplicas": 1}),
            ),
            Status::InProgress,
            "Ready: 1/2",
        ),
        (
            "scaled to zero",
            deploy(
                json!({"replicas": 0}),
                with_conditions(replicas(0), ok_conditions),
            ),
            Status::Current,
            "Deployment is available. Replicas: 0",
        ),
    ]);
}

fn rs(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta(),
               "spec": spec, "status": status})
}

#[test]
fn replica_sets() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta()}),
            Status::InProgress,
            "Labelled: 0/1",
        ),
        (
            "ok with a false ReplicaFailure",
            rs(
                json!({"replicas": 2}),
                json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                           "availableReplicas": 2, "fullyLabeledReplicas": 2,
                           "conditions": [{"type": "ReplicaFailure", "status": "False"}]}),
            ),
            Status::Current,
            "ReplicaSet is available. Replicas: 2",
        ),
        (
            "ok",
            rs(
                json!({"replicas": 2}),
                json!({"observedGeneration": 1, "fullyLabeledReplicas": 2, "replicas": 2,
                           "readyReplicas": 2, "availableReplicas": 2}),
            ),
            Status::Current,
            "ReplicaSet is available. Replicas: 2",
        ),
        (
            "less ready",
            rs(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "replicas": 4, "readyReplicas": 2,
                           "availableReplicas": 4, "fullyLabeledReplicas": 4}),
            ),
            Status::InProgress,
            "Ready: 2/4",
        ),
        (
            "less available",
            rs(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "replicas": 4, "readyReplicas": 4,
                           "availableReplicas": 2, "fullyLabeledReplicas": 4}),
            ),
            Status::InProgress,
            "Available: 2/4",
        ),
        (
            "replica failure",
            rs(
                json!({"replicas": 4}),
                json!({"observedGeneration": 1, "replicas": 4, "readyReplicas": 4,
                           "fullyLabeledReplicas": 4, "availableReplicas": 4,
                           "conditions": [{"type": "ReplicaFailure", "status": "True"}]}),
            ),
            Status::InProgress,
            "Replica Failure condition. Check Pods",
        ),
        (
            "pending termination",
            rs(
                json!({"replicas": 1}),
                json!({"replicas": 3, "readyReplicas": 1, "fullyLabeledReplicas": 1,
                           "availableReplicas": 1}),
            ),
            Status::InProgress,
            "Pending termination: 2",
        ),
    ]);
}

fn job_object(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(),
               "spec": spec, "status": status})
}

#[test]
fn kstatus_jobs() {
    run(vec![
        (
            "no status",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta()}),
            Status::InProgress,
            "Job not started",
        ),
        (
            "complete",
            job_object(
                json!({}),
                json!({"succeeded": 1, "active": 0,
                           "conditions": [{"type": "Complete", "status": "True"}]}),
            ),
            Status::Current,
            "Job Completed. succeeded: 1/1",
        ),
        (
            "failed",
            job_object(
                json!({"completions": 4}),
                json!({"succeeded": 3, "failed": 1, "conditions": [
                        {"type": "Failed", "status": "True", "reason": "JobFailed"}]}),
            ),
            Status::Failed,
            "Job Failed. failed: 1/4",
        ),
        (
            "in progress",
            job_object(
                json!({"completions": 10, "parallelism": 2}),
                json!({"startTime": "2019-06-04T01:17:13Z", "succeeded": 3, "failed": 1,
                           "active": 2, "conditions": [
                               {"type": "Failed", "status": "False"},
                               {"type": "Complete", "status": "False"}]}),
            ),
            Status::Current,
            "Job in progress. success:3, active: 2, failed: 1",
        ),
        (
            "completions default to parallelism",
            job_object(
                json!({"parallelism": 3}),
                json!({"succeeded": 3, "conditions": [{"type": "Complete", "status": "True"}]}),
            ),
            Status::Current,
            "Job Completed. succeeded: 3/3",
        ),
    ]);
}

fn crd_object(conditions: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"generation": 1}, "status": {"conditions": conditions}})
}

#[test]
fn crds() {
    run(vec![
        (
            "no conditions",
            json!({"apiVersion": "apiextensions.k8s.io/v1",
                       "kind": "CustomResourceDefinition", "metadata": {"generation": 1}}),
            Status::InProgress,
            "Install in progress",
        ),
        (
            "installing",
            crd_object(json!([
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                    {"type": "Established", "status": "False", "reason": "Installing"}])),
            Status::InProgress,
            "Install in progress",
        ),
        (
            "names not accepted",
            crd_object(json!([
                    {"type": "NamesAccepted", "status": "False", "reason": "SomeReason",
                     "message": "names conflict"}])),
            Status::Failed,
            "names conflict",
        ),
        (
            "not established",
            crd_object(json!([
                    {"type": "Established", "status": "False", "reason": "Broken",
                     "message": "cannot establish"}])),
            Status::Failed,
            "cannot establish",
        ),
        (
            "established",
            crd_object(json!([
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}])),
            Status::Current,
            "CRD is established",
        ),
    ]);
}

#[test]
fn flux_jobs() {
    let cases: Vec<Case> = vec![
        (
            "suspended",
            job_object(json!({"suspend": true}), json!({})),
            Status::Current,
            "Job is suspended",
        ),
        (
            "suspend false",
            job_object(json!({"suspend": false, "parallelism": 3}), json!({})),
            Status::InProgress,
            "Job not started. active: 0/3",
        ),
        (
            "a non-boolean suspend is ignored",
            job_object(json!({"suspend": "true"}), json!({})),
            Status::InProgress,
            "Job not started. active: 0/1",
        ),
        (
            "no status field at all",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
                       "spec": {"parallelism": 2}}),
            Status::InProgress,
            "Job not started. active: 0/2",
        ),
        (
            "complete",
            job_object(
                json!({"completions": 2}),
                json!({"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}),
            ),
            Status::Current,
            "Job Completed. succeeded: 2/2",
        ),
        (
            "failed",
            job_object(
                json!({"completions": 4}),
                json!({"failed": 1, "conditions": [
                        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
            ),
            Status::Failed,
            "Job Failed. failed: 1/4",
        ),
        (
            "in progress is not current",
            job_object(
                json!({"completions": 3}),
                json!({"startTime": "2024-05-01T11:00:00Z", "succeeded": 1, "active": 2,
                           "failed": 1, "conditions": [{"type": "Complete", "status": "False"}]}),
            ),
            Status::InProgress,
            "Job in progress. success:1, active: 2, failed: 1",
        ),
        (
            "generic properties are not consulted",
            json!({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"generation": 2, "deletionTimestamp": "2024-05-01T11:00:00Z"},
                       "status": {"observedGeneration": 1, "succeeded": 1,
                                  "conditions": [{"type": "Complete", "status": "True"}]}}),
            Status::Current,
            "Job Completed. succeeded: 1/1",
        ),
    ];
    for (name, object, status, message) in cases {
        let got = compute_flux_job(&object).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, Assessment::new(status, message), "{name}");
    }
}

#[test]
fn errors() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "conditions not a list",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "status": {"conditions": "Ready"}}),
            "status.conditions is not a list of conditions (it is of the type string)",
        ),
        (
            "status not an object",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "status": "ok"}),
            "status is not an object (it is of the type string)",
        ),
        (
            "condition not an object",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "status": {"conditions": [{"type": "Ready"}, 3]}}),
            "status.conditions[1] is not a condition (it is of the type int64)",
        ),
        (
            "condition status not a string",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "status": {"conditions": [{"type": "Ready", "status": true}]}}),
            "status.conditions[0].status is not a string (it is of the type bool)",
        ),
        (
            "generation not an integer",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "metadata": {"generation": "2"}}),
            "looking up metadata.generation from resource: .metadata.generation accessor \
                 error: 2 is of the type string, expected int64",
        ),
        (
            "observedGeneration a float",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "metadata": {"generation": 2}, "status": {"observedGeneration": 1.5}}),
            "looking up status.observedGeneration from resource: .status.observedGeneration \
                 accessor error: 1.5 is of the type float64, expected int64",
        ),
        (
            "metadata not an object",
            json!({"apiVersion": "something/v1", "kind": "MyCR", "metadata": ["x", 1]}),
            "looking up metadata.deletionTimestamp from resource: \
                 .metadata.deletionTimestamp accessor error: [x 1] is of the type \
                 []interface {}, expected map[string]interface{}",
        ),
        (
            "null deletionTimestamp",
            json!({"apiVersion": "something/v1", "kind": "MyCR",
                       "metadata": {"deletionTimestamp": null}}),
            "looking up metadata.deletionTimestamp from resource: \
                 .metadata.deletionTimestamp accessor error: <nil> is of the type <nil>, \
                 expected string",
        ),
        (
            "unknown pod phase",
            pod(json!({"phase": "Foo"})),
            "unknown phase Foo",
        ),
        (
            "pod conditions malformed",
            pod(json!({"phase": "Succeeded", "conditions": {"type": "Ready"}})),
            "status.conditions is not a list of conditions (it is of the type \
                 map[string]interface {})",
        ),
        (
            "container statuses not a list",
            pod(json!({"phase": "Running", "containerStatuses": {"a": {"b": 1.0e21}}})),
            ".status.containerStatuses accessor error: map[a:map[b:1e+21]] is of the type \
                 map[string]interface {}, expected []interface{}",
        ),
        (
            "container status not an object",
            pod(json!({"phase": "Running", "containerStatuses": ["nginx"]})),
            "status.containerStatuses[0] is not an object (it is of the type string)",
        ),
        (
            "container name not a string",
            pod(json!({"phase": "Running", "containerStatuses": [{"name": 1}]})),
            "status.containerStatuses[0].name is not a string (it is of the type int64)",
        ),
        (
            "waiting state not an object",
            pod(json!({"phase": "Running", "containerStatuses": [
                    {"name": "a", "state": {"waiting": "yes"}}]})),
            "status.containerStatuses[0].state.waiting is not an object (it is of the type \
                 string)",
        ),
        (
            "daemonset generation not an integer",
            ds(json!({"generation": 1.5}), json!({})),
            "looking up metadata.generation from resource: .metadata.generation accessor \
                 error: 1.5 is of the type float64, expected int64",
        ),
        (
            "deployment conditions malformed",
            deploy(json!({}), json!({"conditions": [{"type": ["Available"]}]})),
            "status.conditions[0].type is not a string (it is of the type []interface {})",
        ),
        (
            "job conditions malformed",
            job_object(json!({}), json!({"conditions": 1})),
            "status.conditions is not a list of conditions (it is of the type int64)",
        ),
        (
            "crd conditions malformed",
            crd_object(json!("Established")),
            "status.conditions is not a list of conditions (it is of the type string)",
        ),
        (
            "replicaset conditions malformed",
            rs(json!({}), json!({"conditions": [false]})),
            "status.conditions[0] is not a condition (it is of the type bool)",
        ),
    ];
    for (name, object, message) in cases {
        match compute(&object, now()) {
            Ok(got) => panic!("{name}: expected an error, got {got:?}"),
            Err(e) => assert_eq!(e.to_string(), message, "{name}"),
        }
    }

    let err = compute_flux_job(&job_object(json!({}), json!({"conditions": "x"})))
        .expect_err("malformed conditions");
    assert_eq!(
        err.to_string(),
        "status.conditions is not a list of conditions (it is of the type string)"
    );
    let unknown = Assessment::unknown(&err);
    assert_eq!(unknown.status, Status::Unknown);
    assert_eq!(unknown.message, "");
    assert_eq!(unknown.error.as_deref(), Some(err.to_string().as_str()));
}

#[test]
fn go_floats() {
    for (f, want) in [
        (1.5, "1.5"),
        (100000.0, "100000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-7, "-2.5e-07"),
    ] {
        assert_eq!(go_float(f), want, "{f}");
    }
}

#[test]
fn group_parsing() {
    for (api_version, want) in [
        ("v1", Some("")),
        ("", Some("")),
        ("/", Some("")),
        ("apps/v1", Some("apps")),
        ("a/b/c", None),
    ] {
        assert_eq!(parse_group(api_version), want, "{api_version}");
    }
}
