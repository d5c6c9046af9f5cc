//! The HTTPS connector of every outgoing connection that is not to the Kubernetes API
//! (artifact downloads, event forwarding, key services): defined once, in the key services
//! crate, which makes the most of these connections; and the one made with a given TLS
//! configuration (SPIFFE mTLS to the artifact and event servers).

use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
pub use keyservice::tls::https_connector;

/// A connector speaking `tls` for HTTPS (plain HTTP still allowed, as Flux's fetcher and
/// forwarder allow it), whose TCP connections open within `connect_timeout`.
pub fn https_connector_with(
    tls: rustls::ClientConfig,
    connect_timeout: Duration,
) -> HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}
