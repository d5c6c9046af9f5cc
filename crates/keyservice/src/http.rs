//! The HTTPS client key services are called with: rustls with the system's root
//! certificates, a deadline per request, and a bound on the response read.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// The most bytes read from a key service's response: far more than any answer holds.
const MAX_RESPONSE: usize = 1 << 20;
/// How long a TCP connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A request that got no usable response. Names the URL (never a header or body, which
/// may hold a credential).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// No response within the deadline.
    #[error("no response from {url} within {timeout:?}")]
    Timeout {
        /// Scheme, host and path of the request.
        url: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The connection failed or broke.
    #[error("request to {url} failed: {reason}")]
    Transport {
        /// Scheme, host and path of the request.
        url: String,
        /// Why, from the connection.
        reason: String,
    },
    /// The response body is larger than any key service answer.
    #[error("response from {url} exceeds {limit} bytes")]
    TooLarge {
        /// Scheme, host and path of the request.
        url: String,
        /// The limit.
        limit: usize,
    },
}

impl HttpError {
    /// Whether trying again may succeed (the service did not answer at all).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            HttpError::Timeout { .. } | HttpError::Transport { .. }
        )
    }
}

/// A key service's answer.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: Bytes,
}

/// A shared HTTPS (and plain HTTP, for local servers) client.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpClient {
    /// A client trusting the system's root certificates (none loaded: HTTPS fails
    /// verification, plain HTTP still works).
    pub fn new() -> Result<Self, rustls::Error> {
        let https = crate::tls::https_connector(CONNECT_TIMEOUT, "key service calls")?;
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        Ok(HttpClient { client })
    }

    /// Sends `request` and reads the whole response, within `timeout`.
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Response, HttpError> {
        let uri = request.uri();
        let url = format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map(|a| a.as_str()).unwrap_or(""),
            uri.path()
        );
        let exchange = async {
            let response =
                self.client
                    .request(request)
                    .await
                    .map_err(|e| HttpError::Transport {
                        url: url.clone(),
                        reason: transport_reason(&e),
                    })?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        HttpError::TooLarge {
                            url: url.clone(),
                            limit: MAX_RESPONSE,
                        }
                    } else {
                        HttpError::Transport {
                            url: url.clone(),
                            reason: e.to_string(),
                        }
                    }
                })?
                .to_bytes();
            Ok(Response { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout {
                url: url.clone(),
                timeout,
            }),
        }
    }
}

/// The innermost cause of a client error ("Connection refused", "invalid peer
/// certificate", ...), which the outer layers only wrap.
fn transport_reason(error: &hyper_util::client::legacy::Error) -> String {
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason = cause.to_string();
        source = cause.source();
    }
    reason
}
