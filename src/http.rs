//! The HTTP endpoints: `/healthz` and `/readyz` on `--health-addr`, `/metrics` on
//! `--metrics-addr`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// An address flag that cannot be bound.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Not a `host:port` or `:port`.
    #[error("invalid address {0:?}: expected host:port or :port")]
    InvalidAddress(String),
    /// Binding failed.
    #[error("failed to listen on {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Parses Go's listen address forms: `:8080` means every interface. `0` disables the
/// endpoint, as in controller-runtime, and gives `None`.
pub fn parse_address(address: &str) -> Result<Option<SocketAddr>, ServeError> {
    if address == "0" || address.is_empty() {
        return Ok(None);
    }
    let full = if address.starts_with(':') {
        format!("0.0.0.0{address}")
    } else {
        address.to_string()
    };
    full.parse()
        .map(Some)
        .map_err(|_| ServeError::InvalidAddress(address.to_string()))
}

/// Whether the process is ready to serve (`/readyz`).
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Binds the probe endpoint and serves it in the background.
pub async fn serve_probes(
    address: &str,
    readiness: Readiness,
) -> Result<Option<SocketAddr>, ServeError> {
    serve(address, move |path| match path {
        "/healthz" => (StatusCode::OK, TEXT, "ok".to_string()),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, TEXT, "ok".to_string()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "not ready".to_string(),
        ),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found".to_string()),
    })
    .await
}

const TEXT: &str = "text/plain; charset=utf-8";

/// What the metrics are encoded in: Prometheus scrapes it with its OpenMetrics parser.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds the metrics endpoint and serves it in the background.
pub async fn serve_metrics(
    address: &str,
    metrics: Metrics,
) -> Result<Option<SocketAddr>, ServeError> {
    serve(address, move |path| match path {
        "/metrics" => (StatusCode::OK, OPENMETRICS, metrics.render()),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found".to_string()),
    })
    .await
}

async fn serve<F>(address: &str, handler: F) -> Result<Option<SocketAddr>, ServeError>
where
    F: Fn(&str) -> (StatusCode, &'static str, String) + Clone + Send + Sync + 'static,
{
    let Some(socket) = parse_address(address)? else {
        return Ok(None);
    };
    let listener = TcpListener::bind(socket)
        .await
        .map_err(|source| ServeError::Bind {
            address: address.to_string(),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Bind {
        address: address.to_string(),
        source,
    })?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                        let (status, content_type, body) = handler(request.uri().path());
                        let response = Response::builder()
                            .status(status)
                            .header(hyper::header::CONTENT_TYPE, content_type)
                            .body(Full::new(Bytes::from(body)));
                        async move { Ok::<_, Infallible>(response.unwrap_or_default()) }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Some(bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_listen_addresses() {
        assert_eq!(
            parse_address(":8080").unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            parse_address("127.0.0.1:9440").unwrap(),
            Some("127.0.0.1:9440".parse().unwrap())
        );
        assert_eq!(parse_address("0").unwrap(), None);
        assert!(parse_address("localhost").is_err());
    }

    #[tokio::test]
    async fn probes_answer() {
        let readiness = Readiness::default();
        let bound = serve_probes("127.0.0.1:0", readiness.clone())
            .await
            .unwrap()
            .unwrap();
        let get = |path: &'static str| async move {
            let stream = tokio::net::TcpStream::connect(bound).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let request = Request::get(path)
                .header("host", "x")
                .body(Full::new(Bytes::new()))
                .unwrap();
            sender.send_request(request).await.unwrap().status()
        };
        assert_eq!(get("/healthz").await, StatusCode::OK);
        assert_eq!(get("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
        readiness.set_ready();
        assert_eq!(get("/readyz").await, StatusCode::OK);
    }
}
