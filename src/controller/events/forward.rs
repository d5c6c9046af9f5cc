//! Delivery of events to `--events-addr`, as Flux's recorder (fluxcd/pkg `runtime/events`
//! over go-retryablehttp) delivers them: a JSON POST, each attempt bounded by 5 s, retried 4
//! times with exponential backoff from 1 s (at most 30 s; a 503's `Retry-After` within that) on
//! connection errors, timeouts and 5xx answers other than 501. A 429 is
//! notification-controller saying it already has the event: delivered, not retried. A
//! certificate that cannot be verified is not retried either. `https://` addresses are
//! verified against the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` replace them, as
//! they do for Go).

use std::time::Duration;

use bytes::Bytes;
use http::{StatusCode, Uri, header};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::payload::EventPayload;

/// The User-Agent of event posts, as the project's other outgoing requests name themselves.
const USER_AGENT: &str = concat!("kustomize-controller/", env!("CARGO_PKG_VERSION"));

/// How an event is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first wait; each next one doubles.
    pub wait_min: Duration,
    /// The longest computed wait.
    pub wait_max: Duration,
    /// The bound on one attempt: connecting, sending and reading the answer's head.
    pub attempt_timeout: Duration,
}

impl RetryPolicy {
    /// Flux's: go-retryablehttp's defaults with the 5 s timeout Flux's recorder sets.
    pub const FLUX: RetryPolicy = RetryPolicy {
        max_retries: 4,
        wait_min: Duration::from_secs(1),
        wait_max: Duration::from_secs(30),
        attempt_timeout: Duration::from_secs(5),
    };

    /// The wait after attempt `attempt` (0-based): `wait_min * 2^attempt`, or what a 503's
    /// `Retry-After` asks for, at most `wait_max` either way. go-retryablehttp does not cap
    /// `Retry-After`; here it is capped, as the post holds up the reconcile that sent it.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.wait_max);
        }
        2u32.checked_pow(attempt)
            .and_then(|factor| self.wait_min.checked_mul(factor))
            .map_or(self.wait_max, |wait| wait.min(self.wait_max))
    }
}

/// A failed delivery.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// `--events-addr` is not an `http://` or `https://` URL.
    #[error("--events-addr {address:?} is not an http:// or https:// URL")]
    InvalidAddress {
        /// The flag's value.
        address: String,
    },
    /// The TLS configuration could not be built.
    #[error("the TLS configuration for --events-addr could not be built: {0}")]
    Tls(#[from] rustls::Error),
    /// The event could not be encoded.
    #[error("the event could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// The request could not be made.
    #[error("the request to {address} could not be made: {source}")]
    Request {
        /// The address.
        address: String,
        /// The cause.
        source: http::Error,
    },
    /// The receiver's certificate was not trusted: not retried.
    #[error("POST {address} failed: the server's certificate is not trusted: {reason}")]
    NotTrusted {
        /// The address.
        address: String,
        /// What the TLS layer said.
        reason: String,
    },
    /// Every attempt failed.
    #[error("POST {address} giving up after {attempts} attempt(s): {last}")]
    GaveUp {
        /// The address.
        address: String,
        /// How many attempts were made.
        attempts: u32,
        /// What went wrong on the last one.
        last: String,
    },
}

/// How a delivered event was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A 2xx, 3xx or 4xx other than 429: not retried, as in Flux (which does not look at it).
    Answered(StatusCode),
    /// 429: notification-controller already had this event.
    Duplicate,
}

/// Posts events to one address.
#[derive(Clone)]
pub struct Forwarder {
    /// The address with any password masked, for messages.
    address: String,
    uri: Uri,
    /// Basic credentials from the address's user info, sent as Go's client sends them.
    authorization: Option<String>,
    policy: RetryPolicy,
    http: HttpClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Forwarder {
    /// A forwarder to `address` with Flux's policy and the system's roots.
    pub fn new(address: &str) -> Result<Self, ForwardError> {
        let connector = crate::tls::https_connector(
            RetryPolicy::FLUX.attempt_timeout,
            "event forwarding (--events-addr)",
        )?;
        Self::with_connector(address, RetryPolicy::FLUX, connector)
    }

    /// A forwarder that trusts exactly `tls`'s roots, with `policy` (tests use short waits).
    pub fn with_tls(
        address: &str,
        policy: RetryPolicy,
        tls: rustls::ClientConfig,
    ) -> Result<Self, ForwardError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(policy.attempt_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Self::with_connector(address, policy, connector)
    }

    fn with_connector(
        address: &str,
        policy: RetryPolicy,
        connector: HttpsConnector<HttpConnector>,
    ) -> Result<Self, ForwardError> {
        let invalid = || ForwardError::InvalidAddress {
            address: redacted(address),
        };
        let uri: Uri = address.parse().map_err(|_| invalid())?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(invalid());
        }
        let authorization = uri
            .authority()
            .and_then(|authority| authority.as_str().rsplit_once('@'))
            .map(|(userinfo, _)| basic_authorization(userinfo));
        Ok(Forwarder {
            address: redacted(address),
            uri,
            authorization,
            policy,
            http: HttpClient::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// The address events go to, any password in it masked.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Posts `event`, retrying as Flux does.
    pub async fn post(&self, event: &EventPayload) -> Result<Delivery, ForwardError> {
        let body = Bytes::from(serde_json::to_vec(event)?);
        let mut attempt = 0;
        loop {
            let outcome = self.attempt(body.clone()).await?;
            let retry_after = match outcome {
                Attempt::Done(delivery) => return Ok(delivery),
                Attempt::Retry { retry_after, .. } => retry_after,
            };
            if attempt >= self.policy.max_retries {
                return Err(ForwardError::GaveUp {
                    address: self.address.clone(),
                    attempts: attempt + 1,
                    last: outcome.describe(),
                });
            }
            tokio::time::sleep(self.policy.backoff(attempt, retry_after)).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, body: Bytes) -> Result<Attempt, ForwardError> {
        let mut request = hyper::Request::post(self.uri.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, USER_AGENT);
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|source| ForwardError::Request {
                address: self.address.clone(),
                source,
            })?;
        let response =
            match tokio::time::timeout(self.policy.attempt_timeout, self.http.request(request))
                .await
            {
                Err(_) => {
                    return Ok(Attempt::Retry {
                        cause: format!(
                            "no answer within {}s",
                            self.policy.attempt_timeout.as_secs_f64()
                        ),
                        retry_after: None,
                    });
                }
                Ok(Err(error)) => {
                    if let Some(reason) = certificate_error(&error) {
                        return Err(ForwardError::NotTrusted {
                            address: self.address.clone(),
                            reason,
                        });
                    }
                    return Ok(Attempt::Retry {
                        cause: error_chain(&error),
                        retry_after: None,
                    });
                }
                Ok(Ok(response)) => response,
            };
        let status = response.status();
        Ok(match status {
            StatusCode::TOO_MANY_REQUESTS => Attempt::Done(Delivery::Duplicate),
            StatusCode::NOT_IMPLEMENTED => Attempt::Done(Delivery::Answered(status)),
            status if status.is_server_error() => Attempt::Retry {
                cause: format!("unexpected HTTP status {status}"),
                retry_after: (status == StatusCode::SERVICE_UNAVAILABLE)
                    .then(|| retry_after(response.headers()))
                    .flatten(),
            },
            status => Attempt::Done(Delivery::Answered(status)),
        })
    }
}

/// The outcome of one attempt.
enum Attempt {
    Done(Delivery),
    Retry {
        cause: String,
        retry_after: Option<Duration>,
    },
}

impl Attempt {
    fn describe(&self) -> String {
        match self {
            Attempt::Done(delivery) => format!("{delivery:?}"),
            Attempt::Retry { cause, .. } => cause.clone(),
        }
    }
}

/// `address` with the password of its user info replaced, as go-retryablehttp logs URLs.
fn redacted(address: &str) -> String {
    let Some((scheme, rest)) = address.split_once("://") else {
        return address.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return address.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:xxxxx@{host}{tail}"),
        None => address.to_string(),
    }
}

/// The `Authorization` value for a URL's `user:password`, percent-decoded as Go decodes it.
fn basic_authorization(userinfo: &str) -> String {
    use base64::Engine as _;
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let credentials = format!("{}:{}", percent_decoded(user), percent_decoded(password));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `Retry-After` of whole seconds or an HTTP date, as go-retryablehttp reads it.
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<i64>() {
        return u64::try_from(seconds).ok().map(Duration::from_secs);
    }
    let at = k8s_openapi::jiff::fmt::rfc2822::parse(value).ok()?;
    let until = at
        .timestamp()
        .duration_since(k8s_openapi::jiff::Timestamp::now());
    Some(Duration::try_from(until).unwrap_or(Duration::ZERO))
}

/// The reason when `error` is a certificate the client does not trust. The rustls error sits
/// inside I/O errors (twice wrapped by hyper-rustls) whose `source()` skips it, so each I/O
/// error is opened.
fn certificate_error(error: &hyper_util::client::legacy::Error) -> Option<String> {
    fn find(error: &(dyn std::error::Error + 'static), depth: usize) -> Option<String> {
        if depth > 16 {
            return None;
        }
        if let Some(rustls::Error::InvalidCertificate(reason)) = error.downcast_ref() {
            return Some(format!("{reason:?}"));
        }
        let inner: Option<&(dyn std::error::Error + 'static)> = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as _);
        inner
            .and_then(|inner| find(inner, depth + 1))
            .or_else(|| error.source().and_then(|source| find(source, depth + 1)))
    }
    find(error, 0)
}

/// `error` and its causes, joined as Go joins wrapped errors.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fluxs_backoff_doubles_from_one_second_up_to_thirty() {
        let policy = RetryPolicy::FLUX;
        let waits: Vec<u64> = (0..7).map(|n| policy.backoff(n, None).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(policy.backoff(40, None), Duration::from_secs(30));
        assert_eq!(
            policy.backoff(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.backoff(0, Some(Duration::from_secs(86_400))),
            Duration::from_secs(30)
        );
        assert_eq!(policy.max_retries, 4);
        assert_eq!(policy.attempt_timeout, Duration::from_secs(5));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(header::RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(header::RETRY_AFTER, "-3".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
        headers.insert(
            header::RETRY_AFTER,
            "Fri, 31 Dec 1999 23:59:59 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        headers.insert(header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn passwords_are_masked_and_sent_as_basic_credentials() {
        assert_eq!(
            redacted("https://nc:s%40cret@events.example/hook?x=1"),
            "https://nc:xxxxx@events.example/hook?x=1"
        );
        assert_eq!(redacted("http://events.example/"), "http://events.example/");
        assert_eq!(
            redacted("http://user@events.example/"),
            "http://user@events.example/"
        );
        // "nc:s@cret" in base64.
        assert_eq!(basic_authorization("nc:s%40cret"), "Basic bmM6c0BjcmV0");
        let forwarder = Forwarder::new("https://nc:s%40cret@events.example/").expect("forwarder");
        assert_eq!(forwarder.address(), "https://nc:xxxxx@events.example/");
        assert_eq!(
            forwarder.authorization.as_deref(),
            Some("Basic bmM6c0BjcmV0")
        );
        let error = Forwarder::new("ftp://nc:secret@events.example/")
            .err()
            .expect("refused");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[test]
    fn only_http_urls_are_addresses() {
        for address in ["notification-controller", "ftp://x/", "http://", "/events"] {
            assert!(
                matches!(
                    Forwarder::new(address),
                    Err(ForwardError::InvalidAddress { .. })
                ),
                "{address}"
            );
        }
        let forwarder = Forwarder::new("https://notification-controller.flux-system.svc/")
            .expect("an https address");
        assert_eq!(
            forwarder.address(),
            "https://notification-controller.flux-system.svc/"
        );
    }
}
