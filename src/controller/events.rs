//! Kubernetes Events on the Kustomization, and their forwarding to Flux's
//! notification-controller (`--events-addr`): the `flux-events` crate (lib `events`),
//! configured as kustomize-controller. What is the controller's here: its name on the events,
//! the User-Agent of the posts, the HTTPS connector they go through, and the reference to a
//! source read as a dynamic object.

pub use ::events::{
    Action, Delivery, EventPayload, EventSink, ForwardError, Forwarder, InvolvedObject, Notice,
    Reference, Reporter, RetryPolicy, Severity, metadata,
};

use crate::api::names::{APPLY_FIELD_MANAGER, SOURCE_GROUP};
use crate::api::source::SourceObject;
use kube::ResourceExt;

/// The User-Agent of event posts, as the project's other outgoing requests name themselves.
pub const USER_AGENT: &str = concat!("kustomize-controller/", env!("CARGO_PKG_VERSION"));

/// The controller as the reporter of its events, running as `instance` (the host name).
pub fn reporter(instance: String) -> Reporter {
    Reporter {
        controller: APPLY_FIELD_MANAGER.to_string(),
        instance,
    }
}

/// A sink that records Events as `kustomize-controller` and, when `events_addr` is not
/// empty, also posts them there as `instance` (the host name, as Flux reports it). An
/// address that is not an http(s) URL is reported once and nothing is posted, as every post
/// to it would fail.
pub fn sink(
    client: kube::Client,
    instance: String,
    events_addr: &str,
    tls: Option<rustls::ClientConfig>,
) -> EventSink {
    let forwarder = if events_addr.is_empty() {
        None
    } else {
        match forwarder(events_addr, tls) {
            Ok(forwarder) => Some(forwarder),
            Err(err) => {
                tracing::error!(error = %err, "events are not forwarded");
                None
            }
        }
    };
    EventSink::new(client, reporter(instance), forwarder)
}

/// A forwarder to `address` with Flux's policy, over `tls` (SPIFFE mTLS with
/// `--authorized-event-server-spiffe-id`), else the HTTPS connector of the controller's
/// other outgoing connections (the system's roots; `SSL_CERT_FILE` and `SSL_CERT_DIR`
/// replace them, as they do for Go).
pub fn forwarder(
    address: &str,
    tls: Option<rustls::ClientConfig>,
) -> Result<Forwarder, ForwardError> {
    let connector = match tls {
        Some(tls) => crate::tls::https_connector_with(tls, RetryPolicy::FLUX.attempt_timeout),
        None => crate::tls::https_connector(
            RetryPolicy::FLUX.attempt_timeout,
            "event forwarding (--events-addr)",
        )?,
    };
    Ok(
        Forwarder::with_connector(address, RetryPolicy::FLUX, connector)?
            .with_user_agent(USER_AGENT),
    )
}

/// The reference to a source, read at any version. Flux reads every source kind with the
/// `source.toolkit.fluxcd.io/v1` Go types, so its references name that version whatever
/// `sourceRef.apiVersion` says.
pub fn source_reference(kind: &str, source: &SourceObject) -> Reference {
    Reference {
        kind: kind.to_string(),
        namespace: source.namespace().unwrap_or_default(),
        name: source.name_any(),
        uid: source.uid().unwrap_or_default(),
        api_version: format!("{SOURCE_GROUP}/v1"),
        resource_version: source.resource_version().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kustomization;
    use serde_json::json;

    #[test]
    fn sources_are_referenced_at_v1() {
        let source: SourceObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1beta2",
            "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": "flux-system", "uid": "src-uid",
                         "resourceVersion": "7"},
        }))
        .unwrap();
        let related = source_reference("GitRepository", &source);
        assert_eq!(
            serde_json::to_value(related).unwrap(),
            json!({"kind": "GitRepository", "namespace": "flux-system", "name": "repo",
                   "uid": "src-uid", "apiVersion": "source.toolkit.fluxcd.io/v1",
                   "resourceVersion": "7"})
        );
    }

    #[test]
    fn kustomizations_are_the_involved_object_as_kustomize_controller() {
        let mut ks = Kustomization::new("app", Default::default());
        ks.metadata.namespace = Some("apps".into());
        ks.metadata.uid = Some("ks-uid".into());
        ks.metadata.resource_version = Some("42".into());
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
        let object = InvolvedObject::of(&ks);
        assert_eq!(
            serde_json::to_value(&object.reference).unwrap(),
            json!({"kind": "Kustomization", "namespace": "apps", "name": "app", "uid": "ks-uid",
                   "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "resourceVersion": "42"})
        );
        let keys: Vec<String> = metadata(&object, Some("main@sha1:1"), None, true)
            .into_keys()
            .collect();
        assert_eq!(
            keys,
            [
                "event.toolkit.fluxcd.io/token",
                "kustomize.toolkit.fluxcd.io/commit_status",
                "kustomize.toolkit.fluxcd.io/revision"
            ]
        );
        assert_eq!(reporter(String::new()).controller, "kustomize-controller");
        let forwarder =
            forwarder("https://notification-controller.flux-system.svc/", None).unwrap();
        assert!(forwarder.user_agent().starts_with("kustomize-controller/"));
    }
}
