//! mTLS client configurations as Flux's `spiffe.BuildTLSConfig` makes them: the
//! workload's current X.509-SVID is presented, and the server must present an X.509-SVID
//! that chains to the trust bundle of its trust domain and whose SPIFFE ID is one of the
//! authorized ones. Host names play no part.

use std::fmt;
use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::id::SpiffeId;
use crate::x509::X509Source;

/// Why a server's certificate was refused. Its message names the server's role, the SPIFFE
/// ID it presented and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The certificate carries no SPIFFE ID (or several).
    #[error("the {role} presented a certificate without exactly one SPIFFE ID URI SAN")]
    NoId {
        /// The server's role (`artifact server`).
        role: String,
    },
    /// The workload has no bundle for the server's trust domain.
    #[error("the {role} presented SPIFFE ID '{id}', of trust domain '{}', for which there is no trust bundle", id.trust_domain())]
    NoBundle {
        /// The server's role.
        role: String,
        /// What it presented.
        id: SpiffeId,
    },
    /// The chain does not verify against the bundle.
    #[error(
        "the {role} presented SPIFFE ID '{id}' with a certificate the trust bundle does not verify: {reason}"
    )]
    Chain {
        /// The server's role.
        role: String,
        /// What it presented.
        id: SpiffeId,
        /// What the verification met.
        reason: String,
    },
    /// The server's SPIFFE ID is not an authorized one.
    #[error(
        "the {role} presented SPIFFE ID '{id}', which is not authorized (authorized: {})",
        Authorized(authorized)
    )]
    Unauthorized {
        /// The server's role.
        role: String,
        /// What it presented.
        id: SpiffeId,
        /// The authorized IDs.
        authorized: Vec<SpiffeId>,
    },
}

struct Authorized<'a>(&'a [SpiffeId]);

impl fmt::Display for Authorized<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, id) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(id.as_str())?;
        }
        Ok(())
    }
}

/// A TLS client configuration that presents the source's current SVID and accepts only a
/// server presenting one of the `authorized` SPIFFE IDs; `role` names the server in
/// errors (`artifact server`, `event server`).
pub fn client_config(
    source: Arc<X509Source>,
    authorized: Vec<SpiffeId>,
    role: &str,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = SpiffeServerVerifier {
        source: Arc::clone(&source),
        authorized,
        role: role.to_owned(),
        algorithms: provider.signature_verification_algorithms,
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_cert_resolver(Arc::new(SvidResolver { source })))
}

/// Presents the source's current default SVID.
struct SvidResolver {
    source: Arc<X509Source>,
}

impl fmt::Debug for SvidResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SvidResolver")
            .field("endpoint", &self.source.endpoint().to_string())
            .finish()
    }
}

impl ResolvesClientCert for SvidResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.source.current().svid().certified_key())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Verifies the server's X.509-SVID against the current bundles and the authorized IDs.
struct SpiffeServerVerifier {
    source: Arc<X509Source>,
    authorized: Vec<SpiffeId>,
    role: String,
    algorithms: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for SpiffeServerVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpiffeServerVerifier")
            .field("role", &self.role)
            .field("authorized", &self.authorized)
            .finish()
    }
}

impl SpiffeServerVerifier {
    fn verify(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), PeerError> {
        let role = || self.role.clone();
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| PeerError::NoId { role: role() })?;
        let mut uris = cert
            .valid_uri_names()
            .filter(|u| u.starts_with("spiffe://"));
        let id = match (uris.next(), uris.next()) {
            (Some(uri), None) => {
                SpiffeId::parse(uri).map_err(|_| PeerError::NoId { role: role() })?
            }
            _ => return Err(PeerError::NoId { role: role() }),
        };
        let context = self.source.current();
        let bundle = context
            .bundle(id.trust_domain())
            .ok_or_else(|| PeerError::NoBundle {
                role: role(),
                id: id.clone(),
            })?;
        let anchors = bundle
            .iter()
            .filter_map(|ca| webpki::anchor_from_trusted_cert(ca).ok())
            .collect::<Vec<_>>();
        cert.verify_for_usage(
            self.algorithms.all,
            &anchors,
            intermediates,
            now,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| PeerError::Chain {
            role: role(),
            id: id.clone(),
            reason: e.to_string(),
        })?;
        if !self.authorized.contains(&id) {
            return Err(PeerError::Unauthorized {
                role: role(),
                id,
                authorized: self.authorized.clone(),
            });
        }
        Ok(())
    }
}

impl ServerCertVerifier for SpiffeServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verify(end_entity, intermediates, now)
            .map(|()| ServerCertVerified::assertion())
            .map_err(|e| {
                rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
                    rustls::OtherError(Arc::new(e)),
                ))
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
