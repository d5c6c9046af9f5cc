//! The HTTPS connector of every outgoing connection that is not to the Kubernetes API
//! (artifact downloads, key services): rustls with the `ring` provider and the system's
//! root certificates, plain HTTP allowed (in-cluster source-controller, local servers).

use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::{ConfigBuilderExt, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;

/// A connector whose TCP connections open within `connect_timeout`. When no root
/// certificate can be loaded, a warning naming `purpose` is logged and HTTPS fails
/// verification, while plain HTTP still works.
pub fn https_connector(
    connect_timeout: Duration,
    purpose: &str,
) -> Result<HttpsConnector<HttpConnector>, rustls::Error> {
    let builder = || {
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
    };
    let tls = match builder()?.with_native_roots() {
        Ok(with_roots) => with_roots.with_no_client_auth(),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "no native root certificates loaded; HTTPS {purpose} will fail verification"
            );
            builder()?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        }
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}
