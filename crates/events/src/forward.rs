//! Delivery of events to `--events-addr`, as Flux's recorder (fluxcd/pkg `runtime/events`
//! over go-retryablehttp) delivers them: a JSON POST, each attempt bounded by 5 s, retried 4
//! times with exponential backoff from 1 s (at most 30 s; a 503's `Retry-After` within that) on
//! connection errors, timeouts and 5xx answers other than 501. A 429 is
//! notification-controller saying it already has the event: delivered, not retried. A
//! certificate that cannot be verified is not retried either.
//!
//! The connection comes from the caller: [`Forwarder::with_connector`] takes any hyper-util
//! connector (the controller's HTTPS connector, verified against the system's roots, which
//! `SSL_CERT_FILE` and `SSL_CERT_DIR` replace as they do for Go), [`Forwarder::with_tls`]
//! builds one that trusts exactly the roots it is given.

use std::time::Duration;

use bytes::Bytes;
use http::{StatusCode, Uri, header};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::TokioExecutor;

use super::payload::EventPayload;

/// The User-Agent of event posts unless [`Forwarder::with_user_agent`] names another.
pub const DEFAULT_USER_AGENT: &str = concat!("flux-events/", env!("CARGO_PKG_VERSION"));

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

/// Posts events to one address, over connections `C` opens (by default hyper-rustls' HTTPS
/// connector, which also speaks plain HTTP).
#[derive(Clone)]
pub struct Forwarder<C = HttpsConnector<HttpConnector>> {
    /// The address with any password masked, for messages.
    address: String,
    uri: Uri,
    /// Basic credentials from the address's user info, sent as Go's client sends them.
    authorization: Option<String>,
    user_agent: String,
    policy: RetryPolicy,
    http: HttpClient<C, Full<Bytes>>,
}

impl Forwarder {
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
}

impl<C: Connect + Clone + Send + Sync + 'static> Forwarder<C> {
    /// A forwarder to `address` with `policy` over `connector`'s connections. The connector
    /// bounds connecting itself (the controller's gives it the policy's attempt timeout);
    /// each attempt is bounded by the policy as well.
    pub fn with_connector(
        address: &str,
        policy: RetryPolicy,
        connector: C,
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
            user_agent: DEFAULT_USER_AGENT.to_string(),
            policy,
            http: HttpClient::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// The same forwarder, naming itself `user_agent` (`kustomize-controller/1.2.3`).
    pub fn with_user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// The User-Agent the posts carry.
    pub fn user_agent(&self) -> &str {
        &self.user_agent
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
            .header(header::USER_AGENT, self.user_agent.as_str());
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
    if let Some(sentence) = verifier_sentence(error) {
        return sentence;
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        if let Some(sentence) = verifier_sentence(cause) {
            text.push_str(&sentence);
            break;
        }
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The sentence of a custom TLS verifier's refusal (SPIFFE ID checks) in `err`: rustls
/// prints such an error with its Debug form, which must not reach a user.
fn verifier_sentence(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    // I/O errors wrap the TLS error, sometimes in another I/O error.
    if let Some(inner) = err
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        return verifier_sentence(inner);
    }
    match err.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) => {
            Some(format!("invalid peer certificate: {other}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use hyper_util::client::legacy::connect::{Connected, Connection};
    use hyper_util::rt::TokioIo;
    use tokio::io::DuplexStream;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    /// A forwarder with Flux's policy over a connector that trusts no root.
    fn forwarder(address: &str) -> Result<Forwarder, ForwardError> {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        Forwarder::with_tls(address, RetryPolicy::FLUX, tls)
    }

    /// Flux's policy with the waits and the timeout scaled down.
    const FAST: RetryPolicy = RetryPolicy {
        max_retries: 4,
        wait_min: Duration::from_millis(50),
        wait_max: Duration::from_millis(1500),
        attempt_timeout: Duration::from_millis(700),
    };

    /// The forwarder's end of an in-memory connection: with nothing but tasks of one runtime
    /// on either end, the runtime idles (and a paused clock moves) only while every task
    /// waits on a timer, so the clock measures the forwarder's own waits exactly.
    struct Pipe(TokioIo<DuplexStream>);

    impl hyper::rt::Read for Pipe {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: hyper::rt::ReadBufCursor<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
        }
    }

    impl hyper::rt::Write for Pipe {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
        }
    }

    impl Connection for Pipe {
        fn connected(&self) -> Connected {
            Connected::new()
        }
    }

    /// Connects each new connection to the receiver of [`receiver`].
    #[derive(Clone)]
    struct InMemory(mpsc::UnboundedSender<DuplexStream>);

    impl tower_service::Service<Uri> for InMemory {
        type Response = Pipe;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Pipe, std::io::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Uri) -> Self::Future {
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            let connected = self.0.send(theirs).map(|()| Pipe(TokioIo::new(ours)));
            std::future::ready(connected.map_err(|_| std::io::ErrorKind::ConnectionRefused.into()))
        }
    }

    /// A receiver on the test's runtime that answers with `answers` in turn (a status and a
    /// `Retry-After`), then 202, and notes when (on the runtime's clock) each request came.
    fn receiver(answers: &[(u16, Option<&'static str>)]) -> (InMemory, Arc<Mutex<Vec<Instant>>>) {
        let (connections, mut accepted) = mpsc::unbounded_channel::<DuplexStream>();
        let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let answers = Arc::new(Mutex::new(answers.iter().copied().collect::<VecDeque<_>>()));
        let noted = times.clone();
        tokio::spawn(async move {
            while let Some(connection) = accepted.recv().await {
                let (times, answers) = (noted.clone(), answers.clone());
                let service = hyper::service::service_fn(move |_request| {
                    times.lock().unwrap().push(Instant::now());
                    let (status, wait) = answers.lock().unwrap().pop_front().unwrap_or((202, None));
                    let mut answer = hyper::Response::builder().status(status);
                    if let Some(wait) = wait {
                        answer = answer.header(header::RETRY_AFTER, wait);
                    }
                    std::future::ready(Ok::<_, Infallible>(
                        answer.body(http_body_util::Empty::<Bytes>::new()).unwrap(),
                    ))
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(connection), service),
                );
            }
        });
        (InMemory(connections), times)
    }

    fn event() -> EventPayload {
        EventPayload {
            involved_object: crate::Reference::default(),
            related_object: None,
            severity: "info",
            timestamp: "2026-11-26T23:40:41Z".into(),
            message: "Reconciliation finished".into(),
            reason: "ReconciliationSucceeded".into(),
            action: "Reconcile",
            metadata: Default::default(),
            reporting_controller: "kustomize-controller".into(),
            reporting_instance: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_503_retry_after_sets_the_wait() {
        let (connector, times) = receiver(&[(503, Some("1"))]);
        let forwarder = Forwarder::with_connector("http://events.test/", FAST, connector).unwrap();
        let delivered = forwarder.post(&event()).await;
        assert_eq!(delivered.unwrap(), Delivery::Answered(StatusCode::ACCEPTED));
        let times = times.lock().unwrap().clone();
        assert_eq!(times.len(), 2, "the 503, then the retry");
        assert_eq!(
            times[1] - times[0],
            Duration::from_secs(1),
            "Retry-After: 1 sets the wait, not the 50 ms backoff"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn server_errors_are_retried_with_doubling_waits_then_given_up() {
        let (connector, times) = receiver(&[(500, None); 5]);
        let forwarder = Forwarder::with_connector("http://events.test/", FAST, connector).unwrap();
        match forwarder.post(&event()).await {
            Err(ForwardError::GaveUp { attempts, last, .. }) => {
                assert_eq!(attempts, 5);
                assert!(last.contains("500"), "{last}");
            }
            other => panic!("expected to give up after 5 attempts, got {other:?}"),
        }
        let times = times.lock().unwrap().clone();
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(
            gaps,
            [50, 100, 200, 400].map(Duration::from_millis),
            "1 attempt and 4 retries, each wait twice the one before"
        );
    }

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
        let masked = forwarder("https://nc:s%40cret@events.example/").expect("forwarder");
        assert_eq!(masked.address(), "https://nc:xxxxx@events.example/");
        assert_eq!(masked.authorization.as_deref(), Some("Basic bmM6c0BjcmV0"));
        let error = forwarder("ftp://nc:secret@events.example/")
            .err()
            .expect("refused");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[test]
    fn only_http_urls_are_addresses() {
        for address in ["notification-controller", "ftp://x/", "http://", "/events"] {
            assert!(
                matches!(forwarder(address), Err(ForwardError::InvalidAddress { .. })),
                "{address}"
            );
        }
        let https = forwarder("https://notification-controller.flux-system.svc/")
            .expect("an https address");
        assert_eq!(
            https.address(),
            "https://notification-controller.flux-system.svc/"
        );
    }
}
