//! The body posted to `--events-addr`: fluxcd/pkg `apis/event` v1's `Event`, which
//! notification-controller v1.10 decodes. Field names, order and omissions follow its Go
//! JSON tags: `relatedObject`, `metadata` and `reportingInstance` are left out when empty,
//! the rest is always written.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use super::{Action, EVENT_ANNOTATION_PREFIX, Reporter, Severity};

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
    /// The reference to `object`, of a kind known at compile time, as client-go's
    /// `GetReference` takes it from the scheme: the type's kind and `group/version`, the
    /// object's name, namespace, UID and resourceVersion.
    pub fn of<K: Resource<DynamicType = ()>>(object: &K) -> Self {
        Reference {
            kind: K::kind(&()).into_owned(),
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
            uid: object.uid().unwrap_or_default(),
            api_version: K::api_version(&()).into_owned(),
            resource_version: object.resource_version().unwrap_or_default(),
        }
    }
}

/// The object an event is about, as Flux's recorder reads it off the object it is given:
/// the reference that names it, and the annotations its events carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InvolvedObject {
    /// The object's reference: the Event's `involvedObject`, the forwarded event's
    /// `involvedObject`; its API group prefixes the revision keys of [`super::metadata`].
    pub reference: Reference,
    /// The object's annotations; those under `event.toolkit.fluxcd.io/` (a notification
    /// `token`, ...) go onto its events, the rest are ignored.
    pub annotations: BTreeMap<String, String>,
}

impl InvolvedObject {
    /// `object`'s reference and its `event.toolkit.fluxcd.io/` annotations.
    pub fn of<K: Resource<DynamicType = ()>>(object: &K) -> Self {
        InvolvedObject {
            reference: Reference::of(object),
            annotations: object
                .annotations()
                .iter()
                .filter(|(key, _)| key.starts_with(EVENT_ANNOTATION_PREFIX))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        }
    }

    /// The API group of the object (empty for the core group).
    pub fn group(&self) -> &str {
        self.reference
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

/// One event as notification-controller receives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventPayload {
    /// The object the event is about.
    pub involved_object: Reference,
    /// An object related to it (for a Kustomization, the source it was reconciled from,
    /// once it was read).
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
    /// The controller's name ([`Reporter::controller`], `kustomize-controller`).
    pub reporting_controller: String,
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
    /// A related object (the source, when it was read).
    pub related: Option<&'a Reference>,
}

impl EventPayload {
    /// The payload of `notice` on `object`, recorded now by `reporter`.
    pub fn new(object: &InvolvedObject, notice: &Notice<'_>, reporter: &Reporter) -> Self {
        EventPayload {
            involved_object: object.reference.clone(),
            related_object: notice.related.cloned(),
            severity: notice.severity.as_str(),
            timestamp: now_to_the_second(),
            message: notice.message.to_string(),
            reason: notice.reason.to_string(),
            action: notice.action.as_str(),
            metadata: notice.metadata.clone(),
            reporting_controller: reporter.controller.clone(),
            reporting_instance: reporter.instance.clone(),
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
    use kube::api::ObjectMeta;
    use serde_json::json;
    use std::borrow::Cow;

    /// A typed object of Flux's, as a controller's own type would implement `Resource`.
    struct Kustomization {
        metadata: ObjectMeta,
    }

    impl Resource for Kustomization {
        type DynamicType = ();
        type Scope = k8s_openapi::NamespaceResourceScope;
        fn kind(_: &()) -> Cow<'_, str> {
            "Kustomization".into()
        }
        fn group(_: &()) -> Cow<'_, str> {
            "kustomize.toolkit.fluxcd.io".into()
        }
        fn version(_: &()) -> Cow<'_, str> {
            "v1".into()
        }
        fn plural(_: &()) -> Cow<'_, str> {
            "kustomizations".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    fn kustomization() -> InvolvedObject {
        InvolvedObject::of(&Kustomization {
            metadata: ObjectMeta {
                name: Some("app".into()),
                namespace: Some("apps".into()),
                uid: Some("ks-uid".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
        })
    }

    fn reporter(instance: &str) -> Reporter {
        Reporter {
            controller: "kustomize-controller".into(),
            instance: instance.into(),
        }
    }

    #[test]
    fn involved_objects_keep_their_event_annotations_and_group() {
        let object = InvolvedObject::of(&Kustomization {
            metadata: ObjectMeta {
                name: Some("app".into()),
                annotations: Some(
                    [
                        ("event.toolkit.fluxcd.io/token", "abc"),
                        ("other.io/x", "y"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ),
                ..ObjectMeta::default()
            },
        });
        let keys: Vec<&str> = object.annotations.keys().map(String::as_str).collect();
        assert_eq!(keys, ["event.toolkit.fluxcd.io/token"]);
        assert_eq!(object.group(), "kustomize.toolkit.fluxcd.io");
        assert_eq!(object.reference.namespace, "", "no namespace, none written");
        let core = InvolvedObject {
            reference: Reference {
                api_version: "v1".into(),
                ..Reference::default()
            },
            ..InvolvedObject::default()
        };
        assert_eq!(core.group(), "");
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
        let value =
            serde_json::to_value(EventPayload::new(&kustomization(), &notice, &reporter("")))
                .unwrap();
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
        let related = Reference {
            kind: "GitRepository".into(),
            namespace: "flux-system".into(),
            name: "repo".into(),
            uid: "src-uid".into(),
            api_version: "source.toolkit.fluxcd.io/v1".into(),
            resource_version: "7".into(),
        };
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
        let value = serde_json::to_value(EventPayload::new(
            &kustomization(),
            &notice,
            &reporter("pod-0"),
        ))
        .unwrap();
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
