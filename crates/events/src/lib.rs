#![doc = include_str!("../README.md")]
//!
//! ## Why not kube's recorder
//!
//! A thin recorder of its own rather than `kube::runtime::events::Recorder`: kube's writes
//! `events.k8s.io/v1` Events (event time, reporting instance, action), while Flux's
//! controllers write core/v1 Events through client-go's recorder (`source.component`, no
//! event time, repeats counted on one object) with their revision annotations, and `flux
//! events`, `kubectl describe` and the parity tests against Flux read exactly those fields.
//! The same event is also forwarded to notification-controller in Flux's format.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

pub mod forward;
pub mod payload;

pub use forward::{Delivery, ForwardError, Forwarder, RetryPolicy};
pub use payload::{EventPayload, InvolvedObject, Notice, Reference};

/// The longest message an Event carries here: core/v1 Events without an event time are not
/// held to the API server's 1 KiB note limit, and Flux's recorder writes them whole; this
/// only bounds what a runaway message costs.
const MAX_NOTE_LEN: usize = 32 * 1024;

/// The revision annotations on Flux's events, each under the involved object's API group
/// (`kustomize.toolkit.fluxcd.io/revision`), as fluxcd/pkg `apis/event` names them.
const REVISION_KEY: &str = "revision";
const ORIGIN_REVISION_KEY: &str = "originRevision";
/// Marks the success event that notification-controller turns into a Git commit status.
const COMMIT_STATUS_KEY: &str = "commit_status";
/// Annotations of the involved object copied onto its events (e.g. a notification `token`).
pub const EVENT_ANNOTATION_PREFIX: &str = "event.toolkit.fluxcd.io/";

/// The metadata of an event on `object`, as Flux's recorder writes it: the revision and
/// origin revision it is about (when known), the object's own `event.toolkit.fluxcd.io/*`
/// annotations, and for the success event the commit status marker. The revision keys are
/// under the object's API group (`<group>/revision`, `<group>/originRevision`,
/// `<group>/commit_status`).
pub fn metadata(
    object: &InvolvedObject,
    revision: Option<&str>,
    origin_revision: Option<&str>,
    commit_status: bool,
) -> BTreeMap<String, String> {
    let mut metadata: BTreeMap<String, String> = object
        .annotations
        .iter()
        .filter(|(key, _)| key.starts_with(EVENT_ANNOTATION_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let group = object.group();
    let key = |name: &str| format!("{group}/{name}");
    let non_empty = |value: Option<&str>| value.filter(|v| !v.is_empty()).map(str::to_string);
    if let Some(revision) = non_empty(revision) {
        metadata.insert(key(REVISION_KEY), revision);
    }
    if let Some(origin) = non_empty(origin_revision) {
        metadata.insert(key(ORIGIN_REVISION_KEY), origin);
    }
    if commit_status {
        metadata.insert(key(COMMIT_STATUS_KEY), "update".into());
    }
    metadata
}

/// Who records events, as Flux's recorder is created with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reporter {
    /// The controller's name (`kustomize-controller`): the Event's `source.component` and
    /// `reportingComponent`, and the forwarded event's `reportingController`.
    pub controller: String,
    /// The instance (the pod's host name, as Flux reports it): the forwarded event's
    /// `reportingInstance`, left out when empty.
    pub instance: String,
}

/// Publishes events on objects as core/v1 Events, as Flux's controllers do.
///
/// Repeats of the same event (same object, type, reason and message) within ten minutes
/// update the existing Event's count instead of creating another, like client-go's event
/// correlator; events that differ in their message stay separate.
#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    reporter: Reporter,
    recent: Arc<Mutex<HashMap<EventKey, Recorded>>>,
    /// Where events are posted.
    forwarder: Option<Forwarder>,
}

/// What makes two events repeats of one another (the object's uid, the severity, the reason
/// and the message), as 128 bits of their SHA-256 digest: change-set messages run to
/// kilobytes, and each of thousands of objects has a few recent events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EventKey([u8; 16]);

impl EventKey {
    fn new(uid: &str, severity: Severity, reason: &str, message: &str) -> Self {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        for part in [uid, severity.as_str(), reason, message] {
            // Each part's length first, so that no two splits of one text digest alike.
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        let mut key = [0; 16];
        key.copy_from_slice(&digest.finalize()[..16]);
        EventKey(key)
    }
}

/// The Event recorded for an [`EventKey`].
#[derive(Clone, Copy, Debug)]
struct Recorded {
    /// When it was created, in nanoseconds: its name's suffix.
    created: i128,
    count: i32,
    last_seen: Timestamp,
}

/// The name of the Event on the object named `object` created at `created` (in nanoseconds),
/// as client-go names it.
fn event_name(object: &str, created: i128) -> String {
    format!("{object}.{created:x}")
}

/// How long a repeat is folded into an earlier Event.
const AGGREGATION_WINDOW_SECONDS: i64 = 600;

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// Normal progress.
    Info,
    /// A failure.
    Error,
}

impl Severity {
    /// Flux's name of the severity (`info`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Error => "error",
        }
    }
}

/// The stage of the reconcile an event is about: the `action` of Flux's event (its
/// kustomize-controller v1.10 API's `Action`). Only forwarded events carry it; the core/v1
/// Event has no place for it, as with Flux's default recorder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The outcome of the whole reconcile (success, or a failure no stage below names).
    Reconcile,
    /// Checking `spec.dependsOn`.
    CheckDependencies,
    /// Reading the source.
    ResolveSource,
    /// Applying the built objects.
    Apply,
    /// Pruning what the source dropped.
    Prune,
    /// The health checks, and their expressions.
    HealthCheck,
    /// Deleting the managed objects of a deleted Kustomization.
    Finalize,
    /// Waiting for them to be gone (`deletionPolicy: WaitForTermination`).
    WaitForTermination,
}

impl Action {
    /// Flux's name of the action.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Reconcile => "Reconcile",
            Action::CheckDependencies => "CheckDependencies",
            Action::ResolveSource => "ResolveSource",
            Action::Apply => "Apply",
            Action::Prune => "Prune",
            Action::HealthCheck => "HealthCheck",
            Action::Finalize => "Finalize",
            Action::WaitForTermination => "WaitForTermination",
        }
    }
}

impl EventSink {
    /// A sink that records Events as `reporter` and, with a `forwarder`, also posts them to
    /// notification-controller.
    pub fn new(client: kube::Client, reporter: Reporter, forwarder: Option<Forwarder>) -> Self {
        EventSink {
            client,
            reporter,
            recent: Arc::default(),
            forwarder,
        }
    }

    /// Records `notice` as an Event on `object` and forwards it. Failures are logged, never
    /// fatal. As in Flux, the post is awaited (events reach notification-controller in
    /// order) and bounded by the retry policy.
    pub async fn publish(&self, object: &InvolvedObject, notice: Notice<'_>) {
        let (name, namespace) = (&object.reference.name, &object.reference.namespace);
        if let Err(err) = self.record(object, &notice).await {
            tracing::warn!(name, namespace, error = %err, "failed to record event");
        }
        let Some(forwarder) = &self.forwarder else {
            return;
        };
        let payload = EventPayload::new(object, &notice, &self.reporter);
        match forwarder.post(&payload).await {
            Ok(Delivery::Duplicate) => {}
            Ok(Delivery::Answered(status)) if status.is_success() => {}
            Ok(Delivery::Answered(status)) => tracing::warn!(
                name,
                namespace,
                status = %status,
                "the events receiver refused the event"
            ),
            Err(err) => tracing::error!(name, namespace, error = %err, "unable to record event"),
        }
    }

    async fn record(
        &self,
        object: &InvolvedObject,
        notice: &Notice<'_>,
    ) -> Result<(), kube::Error> {
        let Notice {
            severity,
            reason,
            message,
            metadata,
            ..
        } = notice;
        let severity = *severity;
        let reference = &object.reference;
        let namespace = reference.namespace.clone();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Timestamp::now();
        let message = truncate(message, MAX_NOTE_LEN);
        let key = EventKey::new(&reference.uid, severity, reason, &message);
        let repeat = self.recent.lock().ok().and_then(|mut recent| {
            recent.retain(|_, r| {
                now.duration_since(r.last_seen).as_secs() < AGGREGATION_WINDOW_SECONDS
            });
            let recorded = recent.get_mut(&key)?;
            recorded.count += 1;
            recorded.last_seen = now;
            Some(*recorded)
        });
        if let Some(repeat) = repeat {
            let patch = serde_json::json!({"count": repeat.count, "lastTimestamp": Time(now)});
            match api
                .patch(
                    &event_name(&reference.name, repeat.created),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => return Ok(()),
                // The Event expired or was deleted: record it afresh.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let created = now.as_nanosecond();
        let name = event_name(&reference.name, created);
        // As client-go's core/v1 recorder writes them (Flux's default): the metadata as
        // annotations, no event time, action or reporting instance.
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                annotations: (!metadata.is_empty()).then(|| metadata.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(reference.api_version.clone()),
                kind: Some(reference.kind.clone()),
                name: Some(reference.name.clone()),
                namespace: non_empty(&reference.namespace),
                uid: non_empty(&reference.uid),
                resource_version: non_empty(&reference.resource_version),
                ..Default::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message),
            type_: Some(match severity {
                Severity::Info => "Normal".into(),
                Severity::Error => "Warning".into(),
            }),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            reporting_component: Some(self.reporter.controller.clone()),
            source: Some(EventSource {
                component: Some(self.reporter.controller.clone()),
                host: None,
            }),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        if let Ok(mut recent) = self.recent.lock() {
            recent.insert(
                key,
                Recorded {
                    created,
                    count: 1,
                    last_seen: now,
                },
            );
        }
        Ok(())
    }
}

/// `text`, or none when it is empty (as client-go leaves out what an object does not have).
fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_share_a_key_and_any_other_part_tells_events_apart() {
        let key = |uid, severity, reason, message| EventKey::new(uid, severity, reason, message);
        let event = key("u1", Severity::Info, "ReconciliationSucceeded", "Applied");
        assert_eq!(
            event,
            key("u1", Severity::Info, "ReconciliationSucceeded", "Applied")
        );
        for other in [
            key("u2", Severity::Info, "ReconciliationSucceeded", "Applied"),
            key("u1", Severity::Error, "ReconciliationSucceeded", "Applied"),
            key("u1", Severity::Info, "Progressing", "Applied"),
            key("u1", Severity::Info, "ReconciliationSucceeded", "Applied."),
            // The same text split elsewhere between the parts.
            key("u1", Severity::Info, "ReconciliationSucceededA", "pplied"),
        ] {
            assert_ne!(event, other);
        }
        assert_eq!(event_name("apps", 0x1a2b), "apps.1a2b");
    }

    #[test]
    fn metadata_carries_revisions_commit_status_and_event_annotations() {
        let ks = InvolvedObject {
            reference: Reference {
                kind: "Kustomization".into(),
                name: "app".into(),
                api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
                ..Reference::default()
            },
            annotations: [
                (
                    "event.toolkit.fluxcd.io/token".to_string(),
                    "abc".to_string(),
                ),
                ("other.io/x".to_string(), "y".to_string()),
            ]
            .into(),
        };
        let metadata = metadata(&ks, Some("main@sha1:1"), Some(""), true);
        let keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "event.toolkit.fluxcd.io/token",
                "kustomize.toolkit.fluxcd.io/commit_status",
                "kustomize.toolkit.fluxcd.io/revision"
            ]
        );
        assert!(super::metadata(&ks, None, None, false).len() == 1);
    }

    #[test]
    fn notes_fit_the_event_limit() {
        assert_eq!(truncate("short", 10), "short");
        let long = "ü".repeat(MAX_NOTE_LEN);
        let cut = truncate(&long, MAX_NOTE_LEN);
        assert!(cut.len() <= MAX_NOTE_LEN && cut.ends_with("..."));
    }
}
