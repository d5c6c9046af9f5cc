//! X.509-SVIDs and trust bundles from the SPIFFE Workload API (`FetchX509SVID`), kept
//! current as the agent rotates them: [`X509Source`] holds the latest [`X509Context`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use crate::endpoint::{Endpoint, EndpointError};
use crate::grpc::{Channel, Code, GrpcError};
use crate::id::{SpiffeId, SpiffeIdError};
use crate::proto::{self, DecodeError, Decoder, Value};

/// The environment variable naming the Workload API socket, as go-spiffe reads it.
pub const SOCKET_ENV: &str = "SPIFFE_ENDPOINT_SOCKET";

const FETCH_X509_SVID: &str = "/SpiffeWorkloadAPI/FetchX509SVID";
/// The metadata every Workload API request carries (the SSRF guard of the standard).
const SECURITY_HEADER: (&str, &str) = ("workload.spiffe.io", "true");

/// One X.509-SVID: its SPIFFE ID and the certificate chain and key presented with it.
pub struct X509Svid {
    id: SpiffeId,
    key: Arc<CertifiedKey>,
}

impl X509Svid {
    /// The SVID's SPIFFE ID.
    pub fn id(&self) -> &SpiffeId {
        &self.id
    }

    /// The chain (leaf first) and signing key, as a TLS client presents them.
    pub fn certified_key(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.key)
    }
}

/// What the Workload API last sent: the workload's SVIDs (the first is the default one,
/// the one presented) and the X.509 bundles of its own and federated trust domains.
pub struct X509Context {
    svids: Vec<X509Svid>,
    bundles: HashMap<String, Vec<CertificateDer<'static>>>,
}

/// Why a Workload API response cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The message is not a valid `X509SVIDResponse`.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The response holds no SVID.
    #[error("the response holds no X.509-SVID")]
    NoSvid,
    /// An SVID's ID is not a SPIFFE ID.
    #[error(transparent)]
    Id(#[from] SpiffeIdError),
    /// An SVID's certificates or bundle are not concatenated DER certificates.
    #[error("the {what} of {id} is not a list of DER certificates")]
    Der {
        /// What was being read.
        what: &'static str,
        /// The SVID's SPIFFE ID.
        id: String,
    },
    /// An SVID's private key cannot be used for TLS.
    #[error("the private key of {id} cannot be used: {source}")]
    Key {
        /// The SVID's SPIFFE ID.
        id: String,
        /// What rustls said of it.
        source: rustls::Error,
    },
}

impl X509Context {
    /// Decodes an `X509SVIDResponse`.
    pub fn decode(message: &[u8]) -> Result<X509Context, ContextError> {
        let provider = rustls::crypto::ring::default_provider();
        let mut context = X509Context {
            svids: Vec::new(),
            bundles: HashMap::new(),
        };
        let mut decoder = Decoder::new(message);
        while let Some((field, value)) = decoder.next()? {
            match (field, value) {
                (1, Value::Bytes(svid)) => {
                    let (svid, bundle) = decode_svid(svid, &provider)?;
                    context
                        .bundles
                        .entry(svid.id.trust_domain().to_owned())
                        .or_insert(bundle);
                    context.svids.push(svid);
                }
                (3, Value::Bytes(entry)) => {
                    let (trust_domain, der) = proto::map_entry(entry)?;
                    let id = SpiffeId::parse(&trust_domain)?;
                    let certs = split_der(&der).ok_or_else(|| ContextError::Der {
                        what: "federated bundle",
                        id: trust_domain.clone(),
                    })?;
                    context.bundles.insert(id.trust_domain().to_owned(), certs);
                }
                _ => {}
            }
        }
        if context.svids.is_empty() {
            return Err(ContextError::NoSvid);
        }
        Ok(context)
    }

    /// The default SVID (the first the Workload API sent).
    pub fn svid(&self) -> &X509Svid {
        &self.svids[0]
    }

    /// The CA certificates trusted for SVIDs of `trust_domain` (`example.org`).
    pub fn bundle(&self, trust_domain: &str) -> Option<&[CertificateDer<'static>]> {
        self.bundles.get(trust_domain).map(Vec::as_slice)
    }
}

fn decode_svid(
    message: &[u8],
    provider: &rustls::crypto::CryptoProvider,
) -> Result<(X509Svid, Vec<CertificateDer<'static>>), ContextError> {
    let (mut id, mut chain, mut key, mut bundle) = (String::new(), &[][..], &[][..], &[][..]);
    let mut decoder = Decoder::new(message);
    while let Some((field, value)) = decoder.next()? {
        if let Value::Bytes(bytes) = value {
            match field {
                1 => id = proto::text(bytes)?,
                2 => chain = bytes,
                3 => key = bytes,
                4 => bundle = bytes,
                _ => {}
            }
        }
    }
    let id = SpiffeId::parse(&id)?;
    let der_error = |what| ContextError::Der {
        what,
        id: id.to_string(),
    };
    let chain = split_der(chain)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| der_error("certificate chain"))?;
    let bundle = split_der(bundle)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| der_error("trust bundle"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.to_vec()));
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|source| ContextError::Key {
        id: id.to_string(),
        source,
    })?;
    Ok((
        X509Svid {
            id,
            key: Arc::new(key),
        },
        bundle,
    ))
}

/// Splits concatenated DER certificates (each a SEQUENCE with a definite length).
pub(crate) fn split_der(mut der: &[u8]) -> Option<Vec<CertificateDer<'static>>> {
    let mut certs = Vec::new();
    while !der.is_empty() {
        if der.first() != Some(&0x30) {
            return None;
        }
        let (header, len) = match *der.get(1)? {
            len @ 0..=0x7f => (2, usize::from(len)),
            octets @ 0x81..=0x84 => {
                let octets = usize::from(octets & 0x7f);
                let bytes = der.get(2..2 + octets)?;
                (
                    2 + octets,
                    bytes.iter().fold(0usize, |n, b| n << 8 | usize::from(*b)),
                )
            }
            _ => return None,
        };
        let end = header.checked_add(len)?;
        let cert = der.get(..end)?;
        certs.push(CertificateDer::from(cert.to_vec()));
        der = &der[end..];
    }
    Some(certs)
}

/// Why no SVID could be obtained from the Workload API.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// `SPIFFE_ENDPOINT_SOCKET` is not set.
    #[error("the SPIFFE Workload API socket is not configured: set {SOCKET_ENV}")]
    NotConfigured,
    /// The socket address is not a SPIFFE endpoint URI.
    #[error("{SOCKET_ENV}: {0}")]
    Address(#[from] EndpointError),
    /// No SVID arrived in time.
    #[error(
        "no X.509-SVID from the SPIFFE Workload API at {endpoint} within {}s: {last_error}",
        waited.as_secs()
    )]
    Unreachable {
        /// The socket.
        endpoint: String,
        /// How long the source tried.
        waited: Duration,
        /// What the last attempt met.
        last_error: String,
    },
    /// The Workload API refused the request as malformed, which no retry mends.
    #[error("the SPIFFE Workload API at {endpoint} refused the request: {message}")]
    Refused {
        /// The socket.
        endpoint: String,
        /// The server's message.
        message: String,
    },
}

#[derive(Clone, Default)]
struct State {
    context: Option<Arc<X509Context>>,
    last_error: Option<String>,
    fatal: bool,
}

/// The workload's X.509 context, kept current from a Workload API stream (reconnecting with
/// a backoff when it breaks). Dropping the source stops the stream.
pub struct X509Source {
    endpoint: Endpoint,
    state: watch::Receiver<State>,
    task: tokio::task::JoinHandle<()>,
}

impl X509Source {
    /// The source of the socket `SPIFFE_ENDPOINT_SOCKET` names; see [`X509Source::connect`].
    pub async fn from_env(startup_timeout: Duration) -> Result<X509Source, SourceError> {
        let address = std::env::var(SOCKET_ENV).map_err(|_| SourceError::NotConfigured)?;
        if address.is_empty() {
            return Err(SourceError::NotConfigured);
        }
        Self::connect(Endpoint::parse(&address)?, startup_timeout).await
    }

    /// Streams SVIDs from the Workload API at `endpoint`, returning once the first arrived;
    /// an error naming the socket and what the last attempt met when none came within
    /// `startup_timeout`.
    pub async fn connect(
        endpoint: Endpoint,
        startup_timeout: Duration,
    ) -> Result<X509Source, SourceError> {
        let (sender, mut state) = watch::channel(State::default());
        let task = tokio::spawn(stream(endpoint.clone(), sender));
        let source = X509Source {
            endpoint,
            state: state.clone(),
            task,
        };
        let first = tokio::time::timeout(
            startup_timeout,
            state.wait_for(|s| s.context.is_some() || s.fatal),
        )
        .await
        .map(|_| ());
        let current = state.borrow().clone();
        match (first, current) {
            (
                Ok(_),
                State {
                    context: Some(_), ..
                },
            ) => Ok(source),
            (
                _,
                State {
                    fatal: true,
                    last_error,
                    ..
                },
            ) => Err(SourceError::Refused {
                endpoint: source.endpoint.to_string(),
                message: last_error.unwrap_or_default(),
            }),
            (_, State { last_error, .. }) => Err(SourceError::Unreachable {
                endpoint: source.endpoint.to_string(),
                waited: startup_timeout,
                last_error: last_error.unwrap_or_else(|| "no response".into()),
            }),
        }
    }

    /// The latest X.509 context.
    pub fn current(&self) -> Arc<X509Context> {
        match &self.state.borrow().context {
            Some(context) => Arc::clone(context),
            // `connect` returns a source only once a context arrived, and none is removed.
            None => unreachable!("an X509Source always holds a context"),
        }
    }

    /// The Workload API socket.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Waits for the next update of the context (a rotation).
    pub async fn changed(&self) {
        let mut state = self.state.clone();
        state.mark_unchanged();
        let _ = state.changed().await;
    }
}

impl Drop for X509Source {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keeps a `FetchX509SVID` stream open, publishing each context; reconnects with an
/// exponential backoff (1 s to 30 s) unless the server says the request is malformed.
async fn stream(endpoint: Endpoint, state: watch::Sender<State>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let error = match watch_once(&endpoint, &state).await {
            Err(WatchError::Grpc(GrpcError::Status { code, message }))
                if code == Code::INVALID_ARGUMENT =>
            {
                tracing::error!(endpoint = %endpoint, message, "the SPIFFE Workload API refused the request");
                state.send_modify(|s| {
                    s.last_error = Some(message);
                    s.fatal = true;
                });
                return;
            }
            Err(error) => error.to_string(),
            Ok(()) => "the stream ended".to_owned(),
        };
        if state.borrow().context.is_some() {
            tracing::warn!(endpoint = %endpoint, error, "SPIFFE Workload API stream broken; reconnecting");
            backoff = Duration::from_secs(1);
        }
        state.send_modify(|s| s.last_error = Some(error));
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

#[derive(Debug, thiserror::Error)]
enum WatchError {
    #[error("cannot connect: {0}")]
    Connect(#[from] std::io::Error),
    #[error(transparent)]
    Grpc(#[from] GrpcError),
    #[error("unusable X.509-SVID response: {0}")]
    Context(#[from] ContextError),
}

async fn watch_once(endpoint: &Endpoint, state: &watch::Sender<State>) -> Result<(), WatchError> {
    let mut channel = Channel::handshake(endpoint.connect().await?).await?;
    let mut responses = channel.call(FETCH_X509_SVID, SECURITY_HEADER, &[]).await?;
    while let Some(message) = responses.message().await? {
        let context = Arc::new(X509Context::decode(&message)?);
        tracing::info!(
            endpoint = %endpoint,
            spiffe_id = %context.svid().id(),
            "received an X.509-SVID from the SPIFFE Workload API"
        );
        state.send_modify(|s| {
            s.context = Some(context);
            s.last_error = None;
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_concatenated_der() {
        let one = [0x30, 0x03, 1, 2, 3];
        let mut long = vec![0x30, 0x81, 0x80];
        long.extend_from_slice(&[9; 0x80]);
        let both = [&one[..], &long[..]].concat();
        let certs = split_der(&both).expect("valid");
        assert_eq!(certs.len(), 2);
        assert_eq!(certs[1].as_ref().len(), 0x83);
        assert!(split_der(&[0x30, 0x05, 1]).is_none());
        assert!(split_der(&[0x02, 0x01, 1]).is_none());
    }
}
