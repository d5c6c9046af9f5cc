//! The body posted to `--events-addr`: fluxcd/pkg `apis/event` v1's `Event`, which
//! notification-controller v1.10 decodes. Field names, order and omissions follow its Go
//! JSON tags: `relatedObject`, `metadata` and `reportingInstance` are left out when empty,
//! the rest is always written.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use super::{Action, Severity};
use crate::api::Kustomization;
use crate::api::names::APPLY_FIELD_MANAGER;

/// A core/v1 `ObjectReference` as client-go's `GetReference` fills it (no `fieldPath`), with
/// empty fields left out as Go's `omitempty` leaves them out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// The kind (`Kustomization`, `GitRepository`, ...).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The UID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// `group/version`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The resourceVersion the object had when it was read.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

impl Reference {
    /// The reference to `ks`.
    pub fn to_kustomization(ks: &Kustomization) -> Self {
        Reference {
            kind: Kustomization::kind(&()).into_owned(),
            namespace: ks.namespace().unwrap_or_default(),
            name: ks.name_any(),
            uid: ks.uid().unwrap_or_default(),
            api_version: Kustomization::api_version(&()).into_owned(),
            resource_version: ks.resource_version().unwrap_or_default(),
        }
    }

    /// The reference to a source read as a dynamic object. Flux reads every source kind with
    /// the `source.toolkit.fluxcd.io/v1` Go types, so its references name that version
    /// whatever `sourceRef.apiVersion` says.
    pub fn to_source(kind: &str, source: &kube::api::DynamicObject) -> Self {
        Reference {
            kind: kind.to_string(),
            namespace: source.namespace().unwrap_or_default(),
            name: source.name_any(),
            uid: source.uid().unwrap_or_default(),
            api_version: format!("{}/v1", crate::api::names::SOURCE_GROUP),
            resource_version: source.resource_version().unwrap_or_default(),
        }
    }
}

/// One event as notification-controller receives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventPayload {
    /// The Kustomization.
    pub involved_object: Reference,
    /// The source the Kustomization was reconciled from, once it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related_object: Option<Reference>,
    /// `info` or `error`.
    pub severity: &'static str,
    /// When the event was recorded, RFC 3339 in UTC to the second (`metav1.Time`).
    pub timestamp: String,
    /// The message.
    pub message: String,
    /// The Ready reason at the time (else the severity).
    pub reason: String,
    /// The stage of the reconcile the event is about.
    pub action: &'static str,
    /// Revisions, the commit-status marker and the object's `event.toolkit.fluxcd.io/*`
    /// annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// `kustomize-controller`.
    pub reporting_controller: &'static str,
    /// The host (pod) name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
}

/// What an event says, beside the object it is on.
#[derive(Clone, Debug)]
pub struct Notice<'a> {
    /// Info or error.
    pub severity: Severity,
    /// The reconcile stage.
    pub action: Action,
    /// The reason.
    pub reason: &'a str,
    /// The message.
    pub message: &'a str,
    /// The metadata (see [`super::metadata`]).
    pub metadata: BTreeMap<String, String>,
    /// The source, when it was read.
    pub related: Option<&'a Reference>,
}

impl EventPayload {
    /// The payload of `notice` on `ks`, recorded now by `instance`.
    pub fn new(ks: &Kustomization, notice: &Notice<'_>, instance: &str) -> Self {
        EventPayload {
            involved_object: Reference::to_kustomization(ks),
            related_object: notice.related.cloned(),
            severity: notice.severity.as_str(),
            timestamp: now_to_the_second(),
            message: notice.message.to_string(),
            reason: notice.reason.to_string(),
            action: notice.action.as_str(),
            metadata: notice.metadata.clone(),
            reporting_controller: APPLY_FIELD_MANAGER,
            reporting_instance: instance.to_string(),
        }
    }
}

/// Now as `metav1.Time` writes it: whole seconds, UTC (`2026-11-26T23:40:41Z`).
fn now_to_the_second() -> String {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kustomization() -> Kustomization {
        let mut ks = Kustomization::new("app", Default::default());
        ks.metadata.namespace = Some("apps".into());
        ks.metadata.uid = Some("ks-uid".into());
        ks.metadata.resource_version = Some("42".into());
        ks
    }

    #[test]
    fn payload_has_fluxs_fields_and_omissions() {
        let notice = Notice {
            severity: Severity::Info,
            action: Action::Reconcile,
            reason: "ReconciliationSucceeded",
            message: "Reconciliation finished",
            metadata: BTreeMap::new(),
            related: None,
        };
        let value = serde_json::to_value(EventPayload::new(&kustomization(), &notice, "")).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Empty relatedObject, metadata and reportingInstance are left out; action stays.
        assert_eq!(
            keys,
            [
                "involvedObject",
                "severity",
                "timestamp",
                "message",
                "reason",
                "action",
                "reportingController"
            ]
        );
        assert_eq!(
            value["involvedObject"],
            json!({"kind": "Kustomization", "namespace": "apps", "name": "app", "uid": "ks-uid",
                   "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "resourceVersion": "42"})
        );
        assert_eq!(value["action"], "Reconcile");
        assert_eq!(value["reportingController"], "kustomize-controller");
    }

    #[test]
    fn related_source_and_metadata_are_written() {
        let source: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1beta2",
            "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": "flux-system", "uid": "src-uid",
                         "resourceVersion": "7"},
        }))
        .unwrap();
        let related = Reference::to_source("GitRepository", &source);
        let notice = Notice {
            severity: Severity::Error,
            action: Action::Apply,
            reason: "Progressing",
            message: "ConfigMap/apps/a created",
            metadata: [(
                "kustomize.toolkit.fluxcd.io/revision".to_string(),
                "r".to_string(),
            )]
            .into(),
            related: Some(&related),
        };
        let value =
            serde_json::to_value(EventPayload::new(&kustomization(), &notice, "pod-0")).unwrap();
        assert_eq!(
            value["relatedObject"],
            json!({"kind": "GitRepository", "namespace": "flux-system", "name": "repo",
                   "uid": "src-uid", "apiVersion": "source.toolkit.fluxcd.io/v1",
                   "resourceVersion": "7"})
        );
        assert_eq!(value["severity"], "error");
        assert_eq!(
            value["metadata"]["kustomize.toolkit.fluxcd.io/revision"],
            "r"
        );
        assert_eq!(value["reportingInstance"], "pod-0");
    }

    #[test]
    fn timestamps_are_whole_seconds_in_utc() {
        let stamp = now_to_the_second();
        assert_eq!(stamp.len(), "2026-11-26T23:40:41Z".len(), "{stamp}");
        assert!(stamp.ends_with('Z') && !stamp.contains('.'), "{stamp}");
    }
}
