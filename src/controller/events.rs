//! Kubernetes Events on the Kustomization, and their forwarding to Flux's
//! notification-controller (`--events-addr`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::Kustomization;
use crate::api::names::APPLY_FIELD_MANAGER;

/// The longest note an Event may carry.
const MAX_NOTE_LEN: usize = 1024;

/// Publishes events for Kustomizations.
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
    forwarder: Option<Forwarder>,
}

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Normal progress.
    Info,
    /// A failure.
    Error,
}

impl EventSink {
    /// A sink that records Events as `kustomize-controller` and, when `events_addr` is not
    /// empty, also posts them to that address.
    pub fn new(client: kube::Client, instance: String, events_addr: &str) -> Self {
        let reporter = Reporter {
            controller: APPLY_FIELD_MANAGER.into(),
            instance: Some(instance.clone()),
        };
        let forwarder =
            (!events_addr.is_empty()).then(|| Forwarder::new(events_addr.to_string(), instance));
        EventSink {
            recorder: Recorder::new(client, reporter),
            forwarder,
        }
    }

    /// Records an event on `ks`. Failures to record are logged, never fatal.
    pub async fn publish(
        &self,
        ks: &Kustomization,
        severity: Severity,
        reason: &str,
        message: &str,
        revision: Option<&str>,
    ) {
        let note = truncate(message, MAX_NOTE_LEN);
        let event = Event {
            type_: match severity {
                Severity::Info => EventType::Normal,
                Severity::Error => EventType::Warning,
            },
            reason: reason.to_string(),
            note: Some(note),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, &ks.object_ref(&())).await {
            tracing::warn!(kustomization = %ks.name_any(), error = %err, "failed to record event");
        }
        if let Some(forwarder) = &self.forwarder {
            forwarder
                .post(ks, severity, reason, message, revision)
                .await;
        }
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
        revision: Option<&str>,
    ) {
        let mut metadata = serde_json::Map::new();
        if let Some(revision) = revision {
            metadata.insert("revision".into(), json!(revision));
        }
        let body = json!({
            "involvedObject": {
                "kind": "Kustomization",
                "namespace": ks.namespace(),
                "name": ks.name_any(),
                "uid": ks.uid(),
                "apiVersion": Kustomization::api_version(&()),
                "resourceVersion": ks.resource_version(),
            },
            "severity": match severity { Severity::Info => "info", Severity::Error => "error" },
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
    fn notes_fit_the_event_limit() {
        assert_eq!(truncate("short", 10), "short");
        let long = "ü".repeat(600);
        let cut = truncate(&long, MAX_NOTE_LEN);
        assert!(cut.len() <= MAX_NOTE_LEN && cut.ends_with("..."));
    }
}
