use super::*;
use apply::ObjectId;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};

fn kustomization(annotations: serde_json::Value, ignore: serde_json::Value) -> Kustomization {
    serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "flux-system", "annotations": annotations},
        "spec": {
            "interval": "1h", "prune": true, "ignore": ignore,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
        },
        "status": {"inventory": {"entries": [
            {"id": "apps_web_apps_Deployment", "v": "v1"},
        ]}},
    }))
    .expect("a Kustomization")
}

fn entry(manager: &str, second: i64, fields: serde_json::Value) -> ManagedFieldsEntry {
    let time = k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + second).expect("a time");
    ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        operation: Some("Update".to_string()),
        time: Some(Time(time)),
        fields_v1: Some(FieldsV1(fields)),
        ..ManagedFieldsEntry::default()
    }
}

fn written(name: &str, version: Option<&str>, writer: &str, fields: serde_json::Value) -> Written {
    Written {
        id: ObjectId {
            namespace: "apps".into(),
            name: name.into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            version: "v1".into(),
        },
        owner: ("flux-system".into(), "app".into()),
        resource_version: version.map(str::to_string),
        labels: Default::default(),
        annotations: Default::default(),
        managed_fields: vec![
            entry(
                APPLY_FIELD_MANAGER,
                0,
                json!({"f:spec": {"f:replicas": {}, "f:paused": {}}}),
            ),
            entry(writer, 5, fields),
        ],
    }
}

const PROMPT: &str = "prompt";

#[test]
fn another_managers_write_is_drift_only_in_prompt_mode() {
    let edit = written(
        "web",
        Some("7"),
        "kubectl-edit",
        json!({"f:spec": {"f:paused": {}}}),
    );
    let prompt = kustomization(json!({DRIFT_CORRECTION_ANNOTATION: PROMPT}), json!([]));
    let drift = Drift::Written {
        manager: "kubectl-edit".into(),
    };
    assert_eq!(
        judge(&edit, &prompt, DriftCorrection::Interval, None),
        Some(drift.clone())
    );
    let plain = kustomization(json!({}), json!([]));
    assert_eq!(judge(&edit, &plain, DriftCorrection::Interval, None), None);
    assert_eq!(
        judge(&edit, &plain, DriftCorrection::Prompt, None),
        Some(drift)
    );
    let opted_out = kustomization(json!({DRIFT_CORRECTION_ANNOTATION: "interval"}), json!([]));
    assert_eq!(
        judge(&edit, &opted_out, DriftCorrection::Prompt, None),
        None
    );
}

#[test]
fn own_writes_status_updates_and_exempt_objects_are_not_drift() {
    let ks = kustomization(json!({DRIFT_CORRECTION_ANNOTATION: PROMPT}), json!([]));
    let own = written("web", Some("7"), APPLY_FIELD_MANAGER, json!({}));
    assert_eq!(judge(&own, &ks, DriftCorrection::Interval, None), None);
    let mut status = written("web", Some("7"), "kube-controller-manager", json!({}));
    if let Some(last) = status.managed_fields.last_mut() {
        last.subresource = Some("status".into());
    }
    assert_eq!(judge(&status, &ks, DriftCorrection::Interval, None), None);
    for (key, value) in [
        (RECONCILE_ANNOTATION, "Disabled"),
        (SSA_ANNOTATION, "IfNotPresent"),
    ] {
        let mut exempt = written("web", Some("7"), "kubectl-edit", json!({"f:spec": {}}));
        exempt.annotations.insert(key.into(), value.into());
        assert_eq!(
            judge(&exempt, &ks, DriftCorrection::Interval, None),
            None,
            "{key}"
        );
    }
    // Not in the inventory: pruned, or somebody else's.
    let stranger = written("other", Some("7"), "kubectl-edit", json!({"f:spec": {}}));
    assert_eq!(judge(&stranger, &ks, DriftCorrection::Interval, None), None);
}

#[test]
fn a_write_in_the_same_second_as_the_controllers_own_is_drift_when_it_came_after() {
    let ks = kustomization(json!({DRIFT_CORRECTION_ANNOTATION: PROMPT}), json!([]));
    let mut tied = written(
        "web",
        Some("8"),
        "kubectl-edit",
        json!({"f:spec": {"f:paused": {}}}),
    );
    for entry in &mut tied.managed_fields {
        entry.time.clone_from(&Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("a time"),
        )));
    }
    let drift = Some(Drift::Written {
        manager: "kubectl-edit".into(),
    });
    // The controller recorded version 7 after its apply: version 8 is somebody else's.
    assert_eq!(
        judge(&tied, &ks, DriftCorrection::Interval, Revision::parse("7")),
        drift
    );
    // Version 8 is the one the controller recorded: its own apply came last.
    assert_eq!(
        judge(&tied, &ks, DriftCorrection::Interval, Revision::parse("8")),
        None
    );
    // Nothing recorded: not told apart, left to the interval.
    assert_eq!(judge(&tied, &ks, DriftCorrection::Interval, None), None);
}

#[test]
fn writes_under_spec_ignore_are_not_drift_and_deletions_are() {
    let ignore = json!([{"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}}]);
    let ks = kustomization(json!({DRIFT_CORRECTION_ANNOTATION: PROMPT}), ignore);
    let hpa = written(
        "web",
        Some("7"),
        "hpa",
        json!({"f:spec": {"f:replicas": {}}}),
    );
    assert_eq!(judge(&hpa, &ks, DriftCorrection::Interval, None), None);
    let more = written(
        "web",
        Some("7"),
        "hpa",
        json!({"f:spec": {"f:replicas": {}, "f:paused": {}}}),
    );
    assert!(judge(&more, &ks, DriftCorrection::Interval, None).is_some());
    let deleted = written("web", None, "kubectl-edit", json!({}));
    assert_eq!(
        judge(&deleted, &ks, DriftCorrection::Interval, None),
        Some(Drift::Deleted)
    );
}

#[test]
fn corrections_within_a_minute_of_each_other_are_spaced_twice_as_far_each_time() {
    let start = Instant::now();
    let mut pace = Pace::default();
    let mut at = start;
    let mut delays = Vec::new();
    for _ in 0..9 {
        let (delay, throttled) = pace.next(at);
        delays.push((delay.as_secs(), throttled));
        pace.last = Some(at + delay);
        at += delay;
    }
    assert_eq!(
        delays,
        [
            (2, false),
            (4, true),
            (8, true),
            (16, true),
            (32, true),
            (64, true),
            (128, true),
            (256, true),
            (300, true)
        ]
    );
    // A calm minute resets the pace.
    let (delay, throttled) = pace.next(at + CALM);
    assert_eq!((delay, throttled), (DEBOUNCE, false));
}
