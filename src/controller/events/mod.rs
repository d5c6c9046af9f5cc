//! Kubernetes Events on the Kustomization, and their forwarding to Flux's
//! notification-controller (`--events-addr`).
//!
//! A thin recorder of its own rather than `kube::runtime::events::Recorder`: kube's writes
//! `events.k8s.io/v1` Events (event time, reporting instance, action), while Flux's controller
//! writes core/v1 Events through client-go's recorder (`source.component`, no event time,
//! repeats counted on one object) with its revision annotations, and `flux events`,
//! `kubectl describe` and the parity tests against Flux read exactly those fields. The same
//! event is also forwarded to notification-controller in Flux's format.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::api::Kustomization;
use crate::api::names::APPLY_FIELD_MANAGER;

/// The longest message an Event carries here: core/v1 Events without an event time are not
/// held to the API server's 1 KiB note limit, and Flux's recorder writes them whole; this
/// only bounds what a runaway message costs.
const MAX_NOTE_LEN: usize = 32 * 1024;

/// The group prefix of the revision annotations on Flux's events.
const REVISION_KEY: &str = "kustomize.toolkit.fluxcd.io/revision";
const ORIGIN_REVISION_KEY: &str = "kustomize.toolkit.fluxcd.io/originRevision";
/// Marks the success event that notification-controller turns into a Git commit status.
const COMMIT_STATUS_KEY: &str = "kustomize.toolkit.fluxcd.io/commit_status";
/// Annotations of the Kustomization copied onto its events (e.g. a notification `token`).
const EVENT_ANNOTATION_PREFIX: &str = "event.toolkit.fluxcd.io/";

/// The metadata of an event on `ks`, as Flux's recorder writes it: the revision and origin
/// revision it is about (when known), the Kustomization's own `event.toolkit.fluxcd.io/*`
/// annotations, and for the success event the commit status marker.
pub fn metadata(
    ks: &Kustomization,
    revision: Option<&str>,
    origin_revision: Option<&str>,
    commit_status: bool,
) -> BTreeMap<String, String> {
    let mut metadata: BTreeMap<String, String> = ks
        .annotations()
        .iter()
        .filter(|(key, _)| key.starts_with(EVENT_ANNOTATION_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let non_empty = |value: Option<&str>| value.filter(|v| !v.is_empty()).map(str::to_string);
    if let Some(revision) = non_empty(revision) {
        metadata.insert(REVISION_KEY.into(), revision);
    }
    if let Some(origin) = non_empty(origin_revision) {
        metadata.insert(ORIGIN_REVISION_KEY.into(), origin);
    }
    if commit_status {
        metadata.insert(COMMIT_STATUS_KEY.into(), "update".into());
    }
    metadata
}

/// Publishes events for Kustomizations as core/v1 Events, as Flux's controller does.
///
/// Repeats of the same event (same object, type, reason and message) within ten minutes
/// update the existing Event's count instead of creating another, like client-go's event
/// correlator; events that differ in their message stay separate.
#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    recent: Arc<Mutex<HashMap<EventKey, Recorded>>>,
    forwarder: Option<Forwarder>,
}

/// What makes two events repeats of one another. The message is kept as a hash: change-set
/// messages run to kilobytes, and thousands of Kustomizations each have a few recent ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EventKey {
    uid: String,
    severity: Severity,
    reason: String,
    message_hash: u64,
}

fn message_hash(message: &str) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    message.hash(&mut hasher);
    hasher.finish()
}

#[derive(Clone, Debug)]
struct Recorded {
    name: String,
    count: i32,
    last_seen: Timestamp,
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

impl EventSink {
    /// A sink that records Events as `kustomize-controller` and, when `events_addr` is not
    /// empty, also posts them to that address.
    pub fn new(client: kube::Client, instance: String, events_addr: &str) -> Self {
        let forwarder = (!events_addr.is_empty())
            .then(|| Forwarder::new(events_addr.to_string(), instance.clone()));
        EventSink {
            client,
            recent: Arc::default(),
            forwarder,
        }
    }

    /// Records an event on `ks`, annotated with `metadata` (see [`metadata`]). Failures to
    /// record are logged, never fatal.
    pub async fn publish(
        &self,
        ks: &Kustomization,
        severity: Severity,
        reason: &str,
        message: &str,
        metadata: BTreeMap<String, String>,
    ) {
        if let Err(err) = self.record(ks, severity, reason, message, &metadata).await {
            tracing::warn!(kustomization = %ks.name_any(), error = %err, "failed to record event");
        }
        if let Some(forwarder) = &self.forwarder {
            forwarder
                .post(ks, severity, reason, message, &metadata)
                .await;
        }
    }

    async fn record(
        &self,
        ks: &Kustomization,
        severity: Severity,
        reason: &str,
        message: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), kube::Error> {
        let namespace = ks.namespace().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Timestamp::now();
        let message = truncate(message, MAX_NOTE_LEN);
        let key = EventKey {
            uid: ks.uid().unwrap_or_default(),
            severity,
            reason: reason.to_string(),
            message_hash: message_hash(&message),
        };
        let repeat = self.recent.lock().ok().and_then(|mut recent| {
            recent.retain(|_, r| {
                now.duration_since(r.last_seen).as_secs() < AGGREGATION_WINDOW_SECONDS
            });
            let recorded = recent.get_mut(&key)?;
            recorded.count += 1;
            recorded.last_seen = now;
            Some(recorded.clone())
        });
        if let Some(repeat) = repeat {
            let patch = serde_json::json!({"count": repeat.count, "lastTimestamp": Time(now)});
            match api
                .patch(&repeat.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                // The Event expired or was deleted: record it afresh.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let name = format!("{}.{:x}", ks.name_any(), now.as_nanosecond());
        // As client-go's core/v1 recorder writes them (Flux's default): the metadata as
        // annotations, no event time, action or reporting instance.
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace),
                annotations: (!metadata.is_empty()).then(|| metadata.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(Kustomization::api_version(&()).into_owned()),
                kind: Some("Kustomization".into()),
                name: Some(ks.name_any()),
                namespace: ks.namespace(),
                uid: ks.uid(),
                resource_version: ks.resource_version(),
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
            reporting_component: Some(APPLY_FIELD_MANAGER.into()),
            source: Some(EventSource {
                component: Some(APPLY_FIELD_MANAGER.into()),
                host: None,
            }),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        if let Ok(mut recent) = self.recent.lock() {
            recent.insert(
                key,
                Recorded {
                    name,
                    count: 1,
                    last_seen: now,
                },
            );
        }
        Ok(())
    }
}

/// Posts events to the notification-controller in Flux's event format.
#[derive(Clone)]
struct Forwarder {
    address: String,
    instance: String,
    http: HttpClient<HttpConnector, Full<Bytes>>,
}

impl Forwarder {
    fn new(address: String, instance: String) -> Self {
        let http = HttpClient::builder(TokioExecutor::new()).build_http();
        Forwarder {
            address,
            instance,
            http,
        }
    }

    async fn post(
        &self,
        ks: &Kustomization,
        severity: Severity,
        reason: &str,
        message: &str,
        metadata: &BTreeMap<String, String>,
    ) {
        let body = json!({
            "involvedObject": {
                "kind": "Kustomization",
                "namespace": ks.namespace(),
                "name": ks.name_any(),
                "uid": ks.uid(),
                "apiVersion": Kustomization::api_version(&()),
                "resourceVersion": ks.resource_version(),
            },
            "severity": severity.as_str(),
            "timestamp": k8s_openapi::jiff::Timestamp::now().to_string(),
            "message": message,
            "reason": reason,
            "metadata": metadata,
            "reportingController": APPLY_FIELD_MANAGER,
            "reportingInstance": self.instance,
        });
        let request = hyper::Request::post(&self.address)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())));
        let Ok(request) = request else {
            tracing::warn!(address = %self.address, "invalid --events-addr");
            return;
        };
        match tokio::time::timeout(Duration::from_secs(15), self.http.request(request)).await {
            Ok(Ok(response)) if response.status().is_success() => {}
            Ok(Ok(response)) => {
                tracing::warn!(status = %response.status(), "event forwarding refused")
            }
            Ok(Err(err)) => tracing::warn!(error = %err, "event forwarding failed"),
            Err(_) => tracing::warn!("event forwarding timed out"),
        }
    }
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
    fn metadata_carries_revisions_commit_status_and_event_annotations() {
        let mut ks = Kustomization::new("app", Default::default());
        ks.metadata.annotations = Some(
            [
                (
                    "event.toolkit.fluxcd.io/token".to_string(),
                    "abc".to_string(),
                ),
                ("other.io/x".to_string(), "y".to_string()),
            ]
            .into(),
        );
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
