//! SPIFFE identities from the flags, as Flux v1.10 sets them up: when any SPIFFE flag is
//! given, the X.509 source of the SPIFFE Workload API (`SPIFFE_ENDPOINT_SOCKET`), then the
//! mTLS configurations of the artifact fetcher (`--authorized-artifact-server-spiffe-id`)
//! and of the event forwarder (`--authorized-event-server-spiffe-id`), and the SPIFFE
//! Broker client of the `spiffe` credential provider (`--spiffe-broker-endpoint`,
//! `--spiffe-broker-id`).

use std::sync::Arc;
use std::time::Duration;

use spiffe::{Broker, BrokerConfigError, SourceError, SpiffeId, X509Source};

use crate::flags::ControllerFlags;

/// How long the controller waits at start-up for its first X.509-SVID.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// What the SPIFFE flags set up; all `None` when none is given.
#[derive(Default)]
pub struct SpiffeIdentity {
    /// The TLS configuration of artifact downloads.
    pub artifact_tls: Option<rustls::ClientConfig>,
    /// The TLS configuration of event forwarding.
    pub event_tls: Option<rustls::ClientConfig>,
    /// The broker issuing JWT-SVIDs for the `spiffe` credential provider.
    pub broker: Option<Arc<Broker>>,
}

/// Why the SPIFFE identities could not be set up; the controller exits.
#[derive(Debug, thiserror::Error)]
pub enum SpiffeError {
    /// No SVID from the Workload API.
    #[error("unable to create the SPIFFE X.509 source: {0}")]
    Source(#[from] SourceError),
    /// A TLS configuration could not be made.
    #[error("unable to configure SPIFFE mTLS for the {role}: {source}")]
    Tls {
        /// `artifact fetcher` or `event server`.
        role: &'static str,
        /// What rustls said.
        source: rustls::Error,
    },
    /// The broker client could not be made.
    #[error("unable to create the SPIFFE Broker client: {0}")]
    Broker(#[from] BrokerConfigError),
}

impl SpiffeIdentity {
    /// Sets up what the flags ask for (their values were validated with the flags).
    pub async fn from_flags(flags: &ControllerFlags) -> Result<SpiffeIdentity, SpiffeError> {
        let artifact_ids = ids(&flags.authorized_artifact_server_spiffe_id);
        let event_ids = ids(&flags.authorized_event_server_spiffe_id);
        let broker_ids = ids(&flags.spiffe_broker_id);
        let wants_broker = !flags.spiffe_broker_endpoint.is_empty() || !broker_ids.is_empty();
        if artifact_ids.is_empty() && event_ids.is_empty() && !wants_broker {
            return Ok(SpiffeIdentity::default());
        }
        let source = Arc::new(X509Source::from_env(STARTUP_TIMEOUT).await?);
        tracing::info!(
            endpoint = %source.endpoint(),
            spiffe_id = %source.current().svid().id(),
            "SPIFFE X.509 source ready"
        );
        let mut identity = SpiffeIdentity::default();
        if !artifact_ids.is_empty() {
            tracing::info!(spiffe_ids = ?flags.authorized_artifact_server_spiffe_id, "artifact fetcher will use inter-controller mTLS via SPIFFE");
            identity.artifact_tls = Some(
                spiffe::client_config(Arc::clone(&source), artifact_ids, "artifact server")
                    .map_err(|source| SpiffeError::Tls {
                        role: "artifact fetcher",
                        source,
                    })?,
            );
        }
        if !event_ids.is_empty() {
            tracing::info!(spiffe_ids = ?flags.authorized_event_server_spiffe_id, "event server will use inter-controller mTLS via SPIFFE");
            identity.event_tls = Some(
                spiffe::client_config(Arc::clone(&source), event_ids, "event server").map_err(
                    |source| SpiffeError::Tls {
                        role: "event server",
                        source,
                    },
                )?,
            );
        }
        if wants_broker {
            let broker = Broker::new(&flags.spiffe_broker_endpoint, broker_ids, source)?;
            tracing::info!(endpoint = %broker.endpoint(), spiffe_ids = ?flags.spiffe_broker_id, "object-level workload identity will use the SPIFFE Broker API");
            identity.broker = Some(Arc::new(broker));
        }
        Ok(identity)
    }
}

/// The IDs of a flag; its values were checked by `ControllerFlags::validate`.
fn ids(values: &[String]) -> Vec<SpiffeId> {
    values
        .iter()
        .filter_map(|id| SpiffeId::parse(id).ok())
        .collect()
}

/// The broker as the key services' source of JWT-SVIDs.
pub struct BrokerTokens(pub Arc<Broker>);

impl keyservice::JwtSvidSource for BrokerTokens {
    fn jwt_svid<'a>(
        &'a self,
        object: &'a keyservice::ObjectReference,
        audiences: Vec<String>,
    ) -> keyservice::identity::SourceFuture<'a, zeroize::Zeroizing<String>> {
        Box::pin(async move {
            let object = spiffe::KubernetesObject {
                group: object.group.clone(),
                plural: object.plural.clone(),
                namespace: object.namespace.clone(),
                name: object.name.clone(),
                uid: object.uid.clone(),
            };
            self.0
                .fetch_jwt_svid(&object, &audiences)
                .await
                .map_err(|e| keyservice::SourceError::with_source(e.to_string(), e))
        })
    }
}

/// The Kustomization `ks` as the object a JWT-SVID is asked for.
pub fn kustomization_object(ks: &crate::api::Kustomization) -> spiffe::KubernetesObject {
    spiffe::KubernetesObject {
        group: crate::api::names::GROUP.to_owned(),
        plural: crate::api::names::PLURAL.to_owned(),
        namespace: ks.metadata.namespace.clone().unwrap_or_default(),
        name: ks.metadata.name.clone().unwrap_or_default(),
        uid: ks.metadata.uid.clone().unwrap_or_default(),
    }
}
