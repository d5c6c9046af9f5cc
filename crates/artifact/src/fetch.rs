//! Downloading, verifying and extracting a source artifact.
//!
//! [`ArtifactFetcher::fetch`] mirrors Flux's `fluxcd/pkg/http/fetch` archive
//! fetcher as used by the kustomize-controller:
//!
//! 1. the URL's `host:port` is replaced by `SOURCE_CONTROLLER_LOCALHOST` when
//!    that variable is set (see [`rewrite_url`]);
//! 2. the artifact is downloaded over HTTP(S) into an anonymous temporary
//!    file (in `$TMPDIR`, deleted when dropped), hashing it on the fly and refusing it as soon as it grows past
//!    [`FetchConfig::max_size`]; connection errors, timeouts, `429` and `5xx`
//!    (except `501`) are retried with jittered exponential backoff, `404` and
//!    other statuses are not; up to 10 redirects are followed;
//! 3. the digest is verified before anything is extracted (a mismatch is not
//!    retried);
//! 4. the tarball is extracted with [`extract_tar_gz`]
//!    on the blocking thread pool.
//!
//! Every error maps to Flux's `ArtifactFailed` reason; the variants let the
//! controller tell the causes apart.

use std::fmt;
use std::io::{self, BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::http::uri::{Authority, InvalidUri, PathAndQuery, Scheme, Uri};
use hyper::{Request, StatusCode, header};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rand::Rng;
use tokio::io::AsyncWriteExt;

use super::digest::{Digest, DigestError};
use super::extract::{ExtractError, ExtractLimits, ExtractSummary, extract_tar_gz};

/// Environment variable that overrides the `host:port` of artifact URLs, as in Flux.
pub const SOURCE_CONTROLLER_LOCALHOST_ENV: &str = "SOURCE_CONTROLLER_LOCALHOST";

/// Maximum number of redirects followed per attempt (Go's `net/http` default).
const MAX_REDIRECTS: u32 = 10;

/// The connect timeout for one TCP connection that the caller gives the [`Connector`] it
/// builds (Go's default dialer value, as in Flux).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The connector downloads go through: rustls over hyper's TCP connector, plain HTTP allowed
/// (what source-controller serves in-cluster). The caller builds it, with the TLS roots it
/// trusts and [`CONNECT_TIMEOUT`], so that every outgoing connection of a process is set up
/// in one place.
pub type Connector = HttpsConnector<HttpConnector>;

const USER_AGENT: &str = concat!("kustomize-controller/", env!("CARGO_PKG_VERSION"));

/// Settings for [`ArtifactFetcher`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchConfig {
    /// How many times a failed download is retried (Flux's `--http-retry`).
    /// Default: 9, i.e. at most 10 attempts.
    pub retries: u32,
    /// Maximum size of the downloaded (compressed) artifact, in bytes.
    /// Default: 100 MiB. Use `u64::MAX` for no limit (Flux's kustomize-controller
    /// does not limit the download).
    pub max_size: u64,
    /// Time allowed for one attempt, from sending the request to the last byte
    /// of the body. Default: 5 minutes.
    pub timeout: Duration,
    /// Backoff before the first retry; it doubles for each further retry.
    /// Default: 5 s (the `RetryWaitMin` of Flux's retrying HTTP client).
    pub min_backoff: Duration,
    /// Upper bound for the backoff between retries, and for a `Retry-After`
    /// header. Default: 30 s (Flux's `RetryWaitMax`).
    ///
    /// The actual wait is jittered uniformly between half and all of the
    /// computed backoff.
    pub max_backoff: Duration,
    /// Limits applied when extracting the artifact.
    pub extract_limits: ExtractLimits,
}

impl FetchConfig {
    /// Default for [`FetchConfig::retries`].
    pub const DEFAULT_RETRIES: u32 = 9;
    /// Default for [`FetchConfig::max_size`]: 100 MiB.
    pub const DEFAULT_MAX_SIZE: u64 = 100 << 20;
    /// Default for [`FetchConfig::timeout`]: 5 minutes.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default for [`FetchConfig::min_backoff`]: 5 seconds.
    pub const DEFAULT_MIN_BACKOFF: Duration = Duration::from_secs(5);
    /// Default for [`FetchConfig::max_backoff`]: 30 seconds.
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            retries: Self::DEFAULT_RETRIES,
            max_size: Self::DEFAULT_MAX_SIZE,
            timeout: Self::DEFAULT_TIMEOUT,
            min_backoff: Self::DEFAULT_MIN_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            extract_limits: ExtractLimits::default(),
        }
    }
}

/// Errors from fetching an artifact. All correspond to Flux's `ArtifactFailed` reason.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The artifact URL (or the `SOURCE_CONTROLLER_LOCALHOST` override) is invalid.
    #[error("invalid artifact URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The artifact digest cannot be parsed or uses an unsupported algorithm.
    #[error(transparent)]
    InvalidDigest(DigestError),
    /// The server answered `404 Not Found`. Not retried.
    #[error("failed to download artifact from {url}: 404 Not Found (artifact not found)")]
    NotFound {
        /// The URL requested.
        url: String,
    },
    /// The server answered with an unexpected status (after retries, for
    /// retryable statuses).
    #[error("failed to download artifact from {url}: {status}{}", attempts_suffix(*.attempts))]
    Status {
        /// The URL requested.
        url: String,
        /// The last status received.
        status: StatusCode,
        /// Number of attempts made.
        attempts: u32,
    },
    /// The request failed (connection refused, reset, TLS error, ...).
    #[error("failed to download artifact from {url}: {reason}{}", attempts_suffix(*.attempts))]
    Request {
        /// The URL requested.
        url: String,
        /// The error, with its causes.
        reason: String,
        /// Number of attempts made.
        attempts: u32,
    },
    /// An attempt exceeded [`FetchConfig::timeout`].
    #[error(
        "failed to download artifact from {url}: timed out after {timeout:?}{}",
        attempts_suffix(*.attempts)
    )]
    Timeout {
        /// The URL requested.
        url: String,
        /// The per-attempt timeout.
        timeout: Duration,
        /// Number of attempts made.
        attempts: u32,
    },
    /// A redirect could not be followed.
    #[error("failed to download artifact from {url}: {source}")]
    Redirect {
        /// The URL requested.
        url: String,
        /// What went wrong.
        #[source]
        source: RedirectError,
    },
    /// The artifact is larger than [`FetchConfig::max_size`]. Not retried.
    #[error("artifact from {url} exceeds the maximum download size of {limit} bytes")]
    TooLarge {
        /// The URL requested.
        url: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The downloaded artifact does not match its digest. Not retried.
    #[error("failed to verify artifact from {url}: {source}")]
    Verify {
        /// The URL requested.
        url: String,
        /// The mismatch.
        #[source]
        source: DigestError,
    },
    /// Storing the download in a temporary file failed.
    #[error("failed to download artifact from {url}: {context}: {source}")]
    Io {
        /// The URL requested.
        url: String,
        /// What was being done.
        context: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The artifact was downloaded and verified but could not be extracted.
    #[error("failed to extract artifact from {url}: {source}")]
    Extract {
        /// The URL requested.
        url: String,
        /// The extraction error.
        #[source]
        source: ExtractError,
    },
    /// The blocking extraction task panicked or was cancelled.
    #[error("failed to extract artifact from {url}: extraction task failed: {reason}")]
    ExtractTask {
        /// The URL requested.
        url: String,
        /// The task failure.
        reason: String,
    },
}

/// Why a redirect could not be followed.
#[derive(Debug, thiserror::Error)]
pub enum RedirectError {
    /// More redirects than Go's `net/http` follows.
    #[error("stopped after {limit} redirects")]
    TooMany {
        /// The number of redirects followed.
        limit: u32,
    },
    /// A redirect status without a `Location` header that is valid text.
    #[error("{status} without a valid Location header")]
    MissingLocation {
        /// The redirect status.
        status: StatusCode,
    },
    /// The `Location` header does not resolve to an http(s) URL.
    #[error("invalid redirect location {location:?}: {problem}")]
    InvalidLocation {
        /// The header as received.
        location: String,
        /// What is wrong with it.
        problem: LocationProblem,
    },
}

/// What is wrong with a redirect's `Location`.
#[derive(Debug, thiserror::Error)]
pub enum LocationProblem {
    /// A relative location, and the URL it is relative to has no host.
    #[error("base URL has no host")]
    NoBaseHost,
    /// The resolved location is not a URI.
    #[error("{0}")]
    Parse(InvalidUri),
    /// The resolved location is not an absolute http(s) URL.
    #[error("not an http(s) URL")]
    NotHttp,
}

fn attempts_suffix(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// Replaces the `host:port` of `url` with `localhost`, keeping scheme, path
/// and query, as Flux does with `SOURCE_CONTROLLER_LOCALHOST`.
///
/// `None` or an empty override returns `url` unchanged.
pub fn rewrite_url(url: &str, localhost: Option<&str>) -> Result<String, FetchError> {
    let Some(localhost) = localhost.filter(|h| !h.is_empty()) else {
        return Ok(url.to_string());
    };
    let invalid = |reason: String| FetchError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    let uri: Uri = url.parse().map_err(|e| invalid(format!("{e}")))?;
    let mut parts = uri.into_parts();
    if parts.scheme.is_none() {
        return Err(invalid("missing scheme".to_string()));
    }
    let authority: Authority = localhost.parse().map_err(|e| {
        invalid(format!(
            "invalid {SOURCE_CONTROLLER_LOCALHOST_ENV} value {localhost:?}: {e}"
        ))
    })?;
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    let uri = Uri::from_parts(parts).map_err(|e| invalid(format!("{e}")))?;
    Ok(uri.to_string())
}

type HttpClient = Client<Connector, Empty<Bytes>>;

/// Downloads, verifies and extracts source artifacts. Cheap to clone; clones
/// share the connection pool.
#[derive(Clone)]
pub struct ArtifactFetcher {
    config: Arc<FetchConfig>,
    localhost: Option<String>,
    client: HttpClient,
}

impl fmt::Debug for ArtifactFetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArtifactFetcher")
            .field("config", &self.config)
            .field("localhost", &self.localhost)
            .finish_non_exhaustive()
    }
}

impl ArtifactFetcher {
    /// Creates a fetcher that connects through `connector` (see [`Connector`]). `localhost`,
    /// if set and non-empty, replaces the `host:port` of every artifact URL (see
    /// [`rewrite_url`]).
    pub fn new(config: FetchConfig, localhost: Option<String>, connector: Connector) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .build(connector);
        ArtifactFetcher {
            config: Arc::new(config),
            localhost: localhost.filter(|h| !h.is_empty()),
            client,
        }
    }

    /// Creates a fetcher, reading the URL override from the
    /// `SOURCE_CONTROLLER_LOCALHOST` environment variable.
    pub fn from_env(config: FetchConfig, connector: Connector) -> Self {
        let localhost = std::env::var(SOURCE_CONTROLLER_LOCALHOST_ENV).ok();
        Self::new(config, localhost, connector)
    }

    /// The fetcher's settings.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// The `host:port` override in effect, if any.
    pub fn localhost(&self) -> Option<&str> {
        self.localhost.as_deref()
    }

    /// Downloads the artifact at `url`, verifies it against `digest`
    /// (`<algorithm>:<hex>`), and extracts it into `dest_root` (created if
    /// missing), returning what was extracted.
    ///
    /// Nothing is written to `dest_root` unless the digest matches. If
    /// extraction fails part-way, `dest_root` holds a partial tree: pass a
    /// fresh temporary directory and discard it on error.
    pub async fn fetch(
        &self,
        url: &str,
        digest: &str,
        dest_root: &Path,
    ) -> Result<ExtractSummary, FetchError> {
        let expected = Digest::parse(digest).map_err(FetchError::InvalidDigest)?;
        let url = rewrite_url(url, self.localhost.as_deref())?;
        let uri = parse_uri(&url)?;
        let file = self.download(&url, &uri, &expected).await?;

        let root: PathBuf = dest_root.to_path_buf();
        let limits = self.config.extract_limits.clone();
        let task_url = url.clone();
        let summary = tokio::task::spawn_blocking(move || {
            let mut file = file;
            file.rewind().map_err(|source| FetchError::Io {
                url: task_url.clone(),
                context: "failed to rewind temporary file",
                source,
            })?;
            extract_tar_gz(BufReader::new(file), &root, &limits).map_err(|source| {
                FetchError::Extract {
                    url: task_url,
                    source,
                }
            })
        })
        .await
        .map_err(|e| FetchError::ExtractTask {
            url: url.clone(),
            reason: e.to_string(),
        })??;
        tracing::debug!(
            url = %url,
            files = summary.files,
            directories = summary.directories,
            symlinks = summary.symlinks,
            bytes = summary.bytes,
            "artifact extracted"
        );
        Ok(summary)
    }

    /// Downloads and verifies, retrying transient failures. Returns the
    /// temporary file holding the verified artifact.
    async fn download(
        &self,
        url: &str,
        uri: &Uri,
        expected: &Digest,
    ) -> Result<std::fs::File, FetchError> {
        let mut attempts: u32 = 0;
        loop {
            attempts += 1;
            let outcome =
                match tokio::time::timeout(self.config.timeout, self.attempt(url, uri, expected))
                    .await
                {
                    Ok(outcome) => outcome,
                    Err(_) => Err(Failure::Timeout),
                };
            let failure = match outcome {
                Ok(file) => return Ok(file),
                Err(failure) => failure,
            };
            if !failure.is_retryable() || attempts > self.config.retries {
                return Err(failure.into_error(url, attempts, self.config.timeout));
            }
            let delay = failure
                .retry_after()
                .map(|d| d.min(self.config.max_backoff))
                .unwrap_or_else(|| {
                    backoff(attempts, self.config.min_backoff, self.config.max_backoff)
                });
            tracing::warn!(
                url = %url,
                attempt = attempts,
                max_attempts = self.config.retries.saturating_add(1),
                error = %failure.describe(self.config.timeout),
                "artifact download failed, retrying in {delay:?}"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One download attempt, following redirects.
    async fn attempt(
        &self,
        url: &str,
        uri: &Uri,
        expected: &Digest,
    ) -> Result<std::fs::File, Failure> {
        let mut current = uri.clone();
        let mut redirects = 0;
        let response = loop {
            let request = Request::get(current.clone())
                .header(header::USER_AGENT, USER_AGENT)
                .body(Empty::<Bytes>::new())
                .map_err(|e| {
                    Failure::Fatal(FetchError::InvalidUrl {
                        url: current.to_string(),
                        reason: e.to_string(),
                    })
                })?;
            let response = self.client.request(request).await.map_err(|e| {
                if is_certificate_error(&e) {
                    Failure::FatalRequest(error_chain(&e))
                } else {
                    Failure::Request(error_chain(&e))
                }
            })?;
            let status = response.status();
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                break response;
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(Failure::Fatal(FetchError::Redirect {
                    url: url.to_string(),
                    source: RedirectError::TooMany {
                        limit: MAX_REDIRECTS,
                    },
                }));
            }
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    Failure::Fatal(FetchError::Redirect {
                        url: url.to_string(),
                        source: RedirectError::MissingLocation { status },
                    })
                })?;
            current = resolve_location(&current, location).map_err(|source| {
                Failure::Fatal(FetchError::Redirect {
                    url: url.to_string(),
                    source,
                })
            })?;
            tracing::debug!(url = %url, location = %current, "following artifact redirect");
        };

        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            return Err(Failure::Fatal(FetchError::NotFound {
                url: url.to_string(),
            }));
        }
        if status == StatusCode::TOO_MANY_REQUESTS
            || (status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED)
        {
            let retry_after = response
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            return Err(Failure::Status {
                status,
                retry_after,
            });
        }
        if status != StatusCode::OK {
            return Err(Failure::FatalStatus(status));
        }
        let too_large = || {
            Failure::Fatal(FetchError::TooLarge {
                url: url.to_string(),
                limit: self.config.max_size,
            })
        };
        let declared = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.config.max_size) {
            return Err(too_large());
        }

        let io_err = |context: &'static str| {
            move |source: io::Error| {
                Failure::Fatal(FetchError::Io {
                    url: url.to_string(),
                    context,
                    source,
                })
            }
        };
        let temp = tokio::task::spawn_blocking(tempfile::tempfile)
            .await
            .map_err(|e| io_err("failed to create temporary file")(io::Error::other(e)))?
            .map_err(io_err("failed to create temporary file"))?;
        let mut file = tokio::fs::File::from_std(temp);
        let mut verifier = expected.verifier();
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Failure::Request(error_chain(&e)))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if verifier.bytes_seen().saturating_add(data.len() as u64) > self.config.max_size {
                return Err(too_large());
            }
            verifier.update(&data);
            file.write_all(&data)
                .await
                .map_err(io_err("failed to write temporary file"))?;
        }
        file.flush()
            .await
            .map_err(io_err("failed to write temporary file"))?;
        verifier.verify().map_err(|source| {
            Failure::Fatal(FetchError::Verify {
                url: url.to_string(),
                source,
            })
        })?;
        Ok(file.into_std().await)
    }
}

/// Why one attempt failed.
enum Failure {
    /// Retryable status (429, 5xx except 501).
    Status {
        status: StatusCode,
        retry_after: Option<Duration>,
    },
    /// Non-retryable, unexpected status.
    FatalStatus(StatusCode),
    /// Retryable request or body error.
    Request(String),
    /// Non-retryable request error (certificate verification).
    FatalRequest(String),
    /// The attempt timed out (retryable).
    Timeout,
    /// Any other non-retryable failure.
    Fatal(FetchError),
}

impl Failure {
    fn is_retryable(&self) -> bool {
        matches!(
            self,
            Failure::Status { .. } | Failure::Request(_) | Failure::Timeout
        )
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    fn describe(&self, timeout: Duration) -> String {
        match self {
            Failure::Status { status, .. } | Failure::FatalStatus(status) => status.to_string(),
            Failure::Request(reason) | Failure::FatalRequest(reason) => reason.clone(),
            Failure::Timeout => format!("timed out after {timeout:?}"),
            Failure::Fatal(e) => e.to_string(),
        }
    }

    fn into_error(self, url: &str, attempts: u32, timeout: Duration) -> FetchError {
        let url = url.to_string();
        match self {
            Failure::Status { status, .. } | Failure::FatalStatus(status) => FetchError::Status {
                url,
                status,
                attempts,
            },
            Failure::Request(reason) | Failure::FatalRequest(reason) => FetchError::Request {
                url,
                reason,
                attempts,
            },
            Failure::Timeout => FetchError::Timeout {
                url,
                timeout,
                attempts,
            },
            Failure::Fatal(e) => e,
        }
    }
}

/// Backoff before retry number `retry` (1-based): `min * 2^(retry-1)` capped
/// at `max`, then jittered uniformly into `[half, full]`.
fn backoff(retry: u32, min: Duration, max: Duration) -> Duration {
    let exp = retry.saturating_sub(1).min(31);
    let base = min.saturating_mul(1u32 << exp).min(max);
    let factor: f64 = rand::thread_rng().gen_range(0.5..=1.0);
    base.mul_f64(factor)
}

fn parse_uri(url: &str) -> Result<Uri, FetchError> {
    let invalid = |reason: String| FetchError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    let uri: Uri = url.parse().map_err(|e| invalid(format!("{e}")))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return Err(invalid(format!("unsupported scheme {other:?}"))),
        None => return Err(invalid("missing scheme".to_string())),
    }
    if uri.authority().is_none() {
        return Err(invalid("missing host".to_string()));
    }
    Ok(uri)
}

/// Resolves a `Location` header against the URL that produced it.
fn resolve_location(base: &Uri, location: &str) -> Result<Uri, RedirectError> {
    let invalid = |problem: LocationProblem| RedirectError::InvalidLocation {
        location: location.to_string(),
        problem,
    };
    let resolved = if location.contains("://") {
        location.to_string()
    } else {
        let scheme = base.scheme().cloned().unwrap_or(Scheme::HTTP);
        if let Some(rest) = location.strip_prefix("//") {
            format!("{scheme}://{rest}")
        } else {
            let authority = base
                .authority()
                .map(|a| a.as_str())
                .ok_or_else(|| invalid(LocationProblem::NoBaseHost))?;
            if location.starts_with('/') {
                format!("{scheme}://{authority}{location}")
            } else {
                let path = base.path();
                let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
                format!("{scheme}://{authority}{dir}{location}")
            }
        }
    };
    let uri: Uri = resolved
        .parse()
        .map_err(|e| invalid(LocationProblem::Parse(e)))?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.authority().is_some() => Ok(uri),
        _ => Err(invalid(LocationProblem::NotHttp)),
    }
}

/// Formats an error and its causes as `a: b: c`, skipping repeats.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(sentence) = verifier_sentence(e) {
            parts.push(sentence);
            break;
        }
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
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

/// Whether the error was caused by a TLS certificate verification failure
/// (retrying cannot help, as in Go's retryablehttp).
fn is_certificate_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(rustls::Error::InvalidCertificate(_)) = e.downcast_ref::<rustls::Error>() {
            return true;
        }
        if let Some(inner) = e.downcast_ref::<io::Error>().and_then(|io| io.get_ref())
            && is_certificate_error(inner)
        {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
pub(crate) mod tests;
