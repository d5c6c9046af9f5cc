use super::*;
use crate::api::KustomizationSpec;
use apply::Change;
use apply::drift::DriftedField;
use serde_json::json;

fn ks(annotations: serde_json::Value, generation: i64) -> Kustomization {
    let mut ks = Kustomization::new("app", KustomizationSpec::default());
    ks.metadata.namespace = Some("apps".into());
    ks.metadata.generation = Some(generation);
    ks.metadata.annotations = serde_json::from_value(annotations).expect("annotations");
    ks
}

fn snapshot(digest: &str, outcome: &str) -> Snapshot {
    serde_json::from_value(json!({
        "digest": digest, "firstReconciled": "2026-01-01T00:00:00Z",
        "lastReconciled": "2026-01-01T00:00:00Z", "lastReconciledDuration": "1s",
        "lastReconciledStatus": outcome, "totalReconciliations": 1,
    }))
    .expect("a snapshot")
}

fn applied(generation: i64, revision: &str, history: Vec<Snapshot>) -> KustomizationStatus {
    KustomizationStatus {
        observed_generation: Some(generation),
        last_applied_revision: Some(revision.into()),
        history: Some(history),
        ..KustomizationStatus::default()
    }
}

const SUCCEEDED: &str = "ReconciliationSucceeded";

#[test]
fn warn_reports_and_anything_else_corrects() {
    let with = |value: &str| ks(json!({DRIFT_DETECTION_ANNOTATION: value}), 1);
    assert_eq!(mode(&ks(json!({}), 1)), Detection::Enabled);
    assert_eq!(mode(&with("warn")), Detection::Warn);
    assert_eq!(mode(&with(" Warn ")), Detection::Warn);
    assert_eq!(mode(&with("enabled")), Detection::Enabled);
    assert_eq!(mode(&with("disabled")), Detection::Enabled);
}

#[test]
fn inputs_are_unchanged_only_for_the_build_the_last_successful_run_applied() {
    let ks = ks(json!({}), 2);
    let status = applied(2, "main@sha1:1", vec![snapshot("sha256:a", SUCCEEDED)]);
    assert!(inputs_unchanged(&ks, &status, "main@sha1:1", "sha256:a"));
    // A new revision, another build (variables changed), a changed spec.
    assert!(!inputs_unchanged(&ks, &status, "main@sha1:2", "sha256:a"));
    assert!(!inputs_unchanged(&ks, &status, "main@sha1:1", "sha256:b"));
    let observed_before = applied(1, "main@sha1:1", vec![snapshot("sha256:a", SUCCEEDED)]);
    assert!(!inputs_unchanged(
        &ks,
        &observed_before,
        "main@sha1:1",
        "sha256:a"
    ));
    // Failures of the same build since (a health check, a refused object) change nothing.
    let failed_since = applied(
        2,
        "main@sha1:1",
        vec![
            snapshot("sha256:a", "HealthCheckFailed"),
            snapshot("sha256:a", SUCCEEDED),
        ],
    );
    assert!(inputs_unchanged(
        &ks,
        &failed_since,
        "main@sha1:1",
        "sha256:a"
    ));
    // Another build failed since, and may have applied part of itself.
    let other_since = applied(
        2,
        "main@sha1:1",
        vec![
            snapshot("sha256:b", "ReconciliationFailed"),
            snapshot("sha256:a", SUCCEEDED),
        ],
    );
    assert!(!inputs_unchanged(
        &ks,
        &other_since,
        "main@sha1:1",
        "sha256:a"
    ));
    // Never applied.
    let never = applied(2, "main@sha1:1", vec![snapshot("sha256:a", "BuildFailed")]);
    assert!(!inputs_unchanged(&ks, &never, "main@sha1:1", "sha256:a"));
    assert!(!inputs_unchanged(
        &ks,
        &KustomizationStatus::default(),
        "main@sha1:1",
        "sha256:a"
    ));
}

fn id(kind: &str, name: &str) -> ObjectId {
    ObjectId {
        namespace: "apps".into(),
        name: name.into(),
        group: String::new(),
        kind: kind.into(),
        version: "v1".into(),
    }
}

fn drifted(name: &str, fields: &[(&str, &[&str])]) -> Change {
    let fields = fields
        .iter()
        .map(|(path, managers)| DriftedField {
            path: path.to_string(),
            managers: managers.iter().map(|m| m.to_string()).collect(),
        })
        .collect();
    Change {
        drift: Some(Drift {
            fields,
            deleted: false,
        }),
        ..Change::new(id("ConfigMap", name), Action::Drifted)
    }
}

#[test]
fn a_report_names_each_object_its_writers_and_fields() {
    let gone = Change {
        drift: Some(Drift::deleted()),
        ..Change::new(id("Service", "web"), Action::Drifted)
    };
    let changes = ChangeSet(vec![
        drifted("a", &[(".data.value", &["kubectl-edit"]), (".data.x", &[])]),
        Change::new(id("ConfigMap", "same"), Action::Unchanged),
        drifted("b", &[(".data.other", &[])]),
        gone,
    ]);
    let report = Report::of(&changes);
    assert_eq!(
        report.event_message(),
        "3 objects drifted from the last applied revision and were left as they are \
         (kustomize.toolkit.fluxcd.io/drift-detection: warn):\n\
         ConfigMap/apps/a changed by kubectl-edit: .data.value, .data.x\n\
         ConfigMap/apps/b changed: .data.other\n\
         Service/apps/web deleted"
    );
    assert_eq!(
        report.condition_message(),
        "3 objects drifted and left as they are: ConfigMap/apps/a changed by kubectl-edit, \
         ConfigMap/apps/b changed, Service/apps/web deleted"
    );
    let many = ChangeSet(
        (0..7)
            .map(|n| drifted(&format!("c{n}"), &[(".data.v", &[])]))
            .collect(),
    );
    assert!(
        Report::of(&many)
            .condition_message()
            .ends_with("ConfigMap/apps/c4 changed and 2 more"),
        "{}",
        Report::of(&many).condition_message()
    );
    let one = ChangeSet(vec![drifted("a", &[(".data.value", &[])])]);
    assert!(
        Report::of(&one)
            .event_message()
            .starts_with("1 object drifted from the last applied revision and was left as it is")
    );
    assert_ne!(Report::of(&one).fingerprint(), report.fingerprint());
}

#[test]
fn the_condition_says_whether_anything_was_left_drifted() {
    let ks = ks(json!({}), 3);
    let mut status = KustomizationStatus::default();
    let changes = ChangeSet(vec![drifted("a", &[(".data.value", &["kubectl-edit"])])]);
    mark(&ks, &mut status, Detection::Warn, &Report::of(&changes));
    let drifted_now = condition(&status).expect("Drifted").clone();
    assert_eq!(
        (drifted_now.status, drifted_now.reason.as_str()),
        (ConditionStatus::True, DRIFT_DETECTED)
    );
    assert_eq!(drifted_now.observed_generation, Some(3));
    mark(&ks, &mut status, Detection::Warn, &Report::default());
    let clean = condition(&status).expect("Drifted");
    assert_eq!(
        (clean.status, clean.reason.as_str(), clean.message.as_str()),
        (ConditionStatus::False, NO_DRIFT, "No drift detected")
    );
    mark(&ks, &mut status, Detection::Enabled, &Report::default());
    assert!(condition(&status).is_none(), "correcting mode is Flux's");
}

#[test]
fn each_drift_set_is_told_once() {
    let changes = ChangeSet(vec![drifted("a", &[(".data.value", &[])])]);
    let report = Report::of(&changes);
    let (fingerprint, message) = (report.fingerprint(), report.condition_message());
    assert!(!is_new(
        Some(Some(fingerprint)),
        None,
        fingerprint,
        &message
    ));
    assert!(is_new(
        Some(Some(fingerprint + 1)),
        None,
        fingerprint,
        &message
    ));
    assert!(
        is_new(Some(None), None, fingerprint, &message),
        "after no drift"
    );
    // Nothing known since the controller started: the condition written before tells.
    let ks = ks(json!({}), 1);
    let mut status = KustomizationStatus::default();
    assert!(is_new(None, condition(&status), fingerprint, &message));
    mark(&ks, &mut status, Detection::Warn, &report);
    assert!(!is_new(None, condition(&status), fingerprint, &message));
    let other = ChangeSet(vec![drifted("b", &[(".data.value", &[])])]);
    let other = Report::of(&other);
    assert!(is_new(
        None,
        condition(&status),
        other.fingerprint(),
        &other.condition_message()
    ));
}
