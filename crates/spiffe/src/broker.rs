//! A SPIFFE Broker API client: JWT-SVIDs for a Kubernetes object (`FetchJWTSVID` with a
//! `KubernetesObjectReference`), over mTLS to the broker endpoint, whose own SPIFFE ID must
//! be one of the authorized broker IDs. This is how Flux's `spiffe` credential provider
//! obtains an object's identity token.

use std::sync::Arc;

use tokio::sync::Mutex;
use zeroize::Zeroizing;

use crate::endpoint::{Endpoint, EndpointError};
use crate::grpc::{Channel, GrpcError};
use crate::id::SpiffeId;
use crate::proto::{self, Decoder, Encoder, Value};
use crate::x509::X509Source;

const FETCH_JWT_SVID: &str = "/spiffe.broker.API/FetchJWTSVID";
/// The metadata every Broker API request carries (the SSRF guard of the standard).
const SECURITY_HEADER: (&str, &str) = ("broker.spiffe.io", "true");
const OBJECT_REFERENCE_TYPE: &str = "type.googleapis.com/spiffe.broker.KubernetesObjectReference";

/// The Kubernetes object a JWT-SVID is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubernetesObject {
    /// The API group (`core` for the core group).
    pub group: String,
    /// The resource's plural name (`kustomizations`).
    pub plural: String,
    /// The namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The UID; when set, the broker checks the object named has it.
    pub uid: String,
}

impl KubernetesObject {
    fn encode(&self) -> bytes::Bytes {
        let kind = Encoder::default()
            .bytes(1, self.plural.as_bytes())
            .bytes(2, self.group.as_bytes())
            .finish();
        let key = Encoder::default()
            .bytes(1, self.namespace.as_bytes())
            .bytes(2, self.name.as_bytes())
            .finish();
        let reference = Encoder::default()
            .message(1, &kind)
            .message(2, &key)
            .bytes(3, self.uid.as_bytes())
            .finish();
        let any = Encoder::default()
            .bytes(1, OBJECT_REFERENCE_TYPE.as_bytes())
            .bytes(2, &reference)
            .finish();
        Encoder::default().message(1, &any).finish()
    }
}

/// Why a broker client cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum BrokerConfigError {
    /// No endpoint given.
    #[error("the SPIFFE Broker endpoint is not set")]
    NoEndpoint,
    /// No broker SPIFFE ID given: the broker could not be authenticated.
    #[error("no SPIFFE ID is authorized for the SPIFFE Broker at {0}")]
    NoBrokerId(String),
    /// The endpoint is not a SPIFFE endpoint URI.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The TLS configuration could not be made.
    #[error("TLS configuration for the SPIFFE Broker: {0}")]
    Tls(#[from] rustls::Error),
}

/// Why no JWT-SVID was obtained. Messages name the broker endpoint, never a token.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The broker could not be reached or the TLS handshake failed.
    #[error("cannot connect to the SPIFFE Broker at {endpoint}: {reason}")]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// What failed (for a refused broker identity, the ID it presented).
        reason: String,
    },
    /// The broker refused the request or answered badly.
    #[error("the SPIFFE Broker at {endpoint} did not issue a JWT-SVID: {source}")]
    Call {
        /// The endpoint.
        endpoint: String,
        /// The gRPC error.
        source: GrpcError,
    },
    /// The answer held no usable JWT-SVID.
    #[error("the SPIFFE Broker at {endpoint} returned no JWT-SVID")]
    Empty {
        /// The endpoint.
        endpoint: String,
    },
}

/// A client of one SPIFFE Broker endpoint; one HTTP/2 connection, made again when it closes.
pub struct Broker {
    endpoint: Endpoint,
    tls: tokio_rustls::TlsConnector,
    channel: Mutex<Option<Channel>>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("endpoint", &self.endpoint.to_string())
            .finish()
    }
}

impl Broker {
    /// A client of the broker at `endpoint` (`unix:///path` or `tcp://host:port`) that
    /// authenticates with the source's SVID and accepts only a broker presenting one of
    /// `broker_ids`.
    pub fn new(
        endpoint: &str,
        broker_ids: Vec<SpiffeId>,
        source: Arc<X509Source>,
    ) -> Result<Broker, BrokerConfigError> {
        if endpoint.is_empty() {
            return Err(BrokerConfigError::NoEndpoint);
        }
        let endpoint = Endpoint::parse(endpoint)?;
        if broker_ids.is_empty() {
            return Err(BrokerConfigError::NoBrokerId(endpoint.to_string()));
        }
        let mut tls = crate::tls::client_config(source, broker_ids, "SPIFFE Broker")?;
        tls.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Broker {
            endpoint,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            channel: Mutex::new(None),
        })
    }

    /// The broker's endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// A JWT-SVID of `object` for `audiences` (the first the broker returns).
    pub async fn fetch_jwt_svid(
        &self,
        object: &KubernetesObject,
        audiences: &[String],
    ) -> Result<Zeroizing<String>, BrokerError> {
        let mut request = Encoder::default();
        request.message(1, &object.encode());
        for audience in audiences {
            request.bytes(2, audience.as_bytes());
        }
        let request = request.finish();
        let mut guard = self.channel.lock().await;
        if guard.as_ref().is_none_or(Channel::is_closed) {
            *guard = Some(self.connect().await?);
        }
        let call_error = |source| BrokerError::Call {
            endpoint: self.endpoint.to_string(),
            source,
        };
        let Some(channel) = guard.as_mut() else {
            return Err(BrokerError::Empty {
                endpoint: self.endpoint.to_string(),
            });
        };
        let result = async {
            let mut responses = channel
                .call(FETCH_JWT_SVID, SECURITY_HEADER, &request)
                .await?;
            responses.message().await
        }
        .await;
        let message = match result {
            Ok(message) => message,
            Err(error) => {
                if matches!(error, GrpcError::Transport(_)) {
                    *guard = None;
                }
                return Err(call_error(error));
            }
        };
        drop(guard);
        message
            .and_then(|m| first_svid(&m))
            .ok_or_else(|| BrokerError::Empty {
                endpoint: self.endpoint.to_string(),
            })
    }

    async fn connect(&self) -> Result<Channel, BrokerError> {
        let fail = |reason: String| BrokerError::Connect {
            endpoint: self.endpoint.to_string(),
            reason,
        };
        let io = self
            .endpoint
            .connect()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let name = rustls::pki_types::ServerName::try_from("spiffe-broker")
            .map_err(|e| fail(e.to_string()))?;
        let tls = self
            .tls
            .connect(name, io)
            .await
            .map_err(|e| fail(tls_reason(&e)))?;
        Channel::handshake(Box::new(tls))
            .await
            .map_err(|e| fail(e.to_string()))
    }
}

/// A TLS failure's reason: the verifier's own sentence when it refused the peer.
pub(crate) fn tls_reason(error: &std::io::Error) -> String {
    match error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) => {
            other.0.to_string()
        }
        Some(other) => other.to_string(),
        None => error.to_string(),
    }
}

/// The first JWT-SVID's token of a `FetchJWTSVIDResponse`.
fn first_svid(message: &[u8]) -> Option<Zeroizing<String>> {
    let mut decoder = Decoder::new(message);
    while let Ok(Some((field, value))) = decoder.next() {
        if let (1, Value::Bytes(svid)) = (field, value) {
            let mut fields = Decoder::new(svid);
            while let Ok(Some((field, value))) = fields.next() {
                if let (2, Value::Bytes(token)) = (field, value) {
                    return proto::text(token)
                        .ok()
                        .filter(|t| !t.is_empty())
                        .map(Zeroizing::new);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_references_are_packed_in_an_any() {
        let object = KubernetesObject {
            group: "kustomize.toolkit.fluxcd.io".into(),
            plural: "kustomizations".into(),
            namespace: "apps".into(),
            name: "podinfo".into(),
            uid: "0fa1b2c3".into(),
        };
        let encoded = object.encode();
        let mut outer = Decoder::new(&encoded);
        let Some((1, Value::Bytes(any))) = outer.next().expect("valid") else {
            panic!("no reference field");
        };
        let mut any = Decoder::new(any);
        let Some((1, Value::Bytes(type_url))) = any.next().expect("valid") else {
            panic!("no type_url");
        };
        assert_eq!(type_url, OBJECT_REFERENCE_TYPE.as_bytes());
        let Some((2, Value::Bytes(reference))) = any.next().expect("valid") else {
            panic!("no value");
        };
        let text = String::from_utf8_lossy(reference);
        for part in [
            "kustomizations",
            "kustomize.toolkit.fluxcd.io",
            "apps",
            "podinfo",
            "0fa1b2c3",
        ] {
            assert!(text.contains(part), "{part} missing");
        }
    }

    #[test]
    fn reads_the_first_token() {
        let svid = |token: &str| {
            Encoder::default()
                .bytes(1, b"spiffe://x/y")
                .bytes(2, token.as_bytes())
                .finish()
        };
        let response = Encoder::default()
            .message(1, &svid("first"))
            .message(1, &svid("second"))
            .finish();
        assert_eq!(
            first_svid(&response).as_deref().map(String::as_str),
            Some("first")
        );
        assert!(first_svid(&Encoder::default().finish()).is_none());
    }
}
