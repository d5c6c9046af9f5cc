//! GET of a single file over HTTP(S), as kustomize loads a remote resource.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use crate::deadline::{self, Cancel, Stopped};
use crate::error::FetchError;
use crate::guard;
use crate::url::{redact, scrub};

/// The most redirects followed, as Go's HTTP client.
const MAX_REDIRECTS: usize = 10;

/// See [`crate::fetch_file`].
pub(crate) fn fetch_file(
    url: &str,
    timeout: Duration,
    max_bytes: u64,
) -> Result<Vec<u8>, FetchError> {
    let shown = redact(url);
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
            if let Some(Err(refusal)) = parsed.host_str().map(guard::check_host) {
                return Err(FetchError::Refused {
                    url: shown,
                    reason: refusal.to_string(),
                });
            }
        }
        Ok(parsed) => {
            return Err(FetchError::InvalidUrl {
                url: shown,
                reason: format!(
                    "the {} scheme is not supported, only http and https",
                    parsed.scheme()
                ),
            });
        }
        Err(e) => {
            return Err(FetchError::InvalidUrl {
                url: shown,
                reason: e.to_string(),
            });
        }
    }
    crate::tls::install_crypto_provider();
    let owned = url.to_string();
    match deadline::run(timeout, move |cancel| {
        get(&owned, timeout, max_bytes, &cancel)
    }) {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(failure)) => Err(failure.into_error(url, shown, max_bytes, timeout)),
        Err(Stopped::TimedOut) => Err(FetchError::Timeout {
            url: shown,
            timeout: goduration::format(timeout),
        }),
        Err(Stopped::Lost) => Err(FetchError::Internal { url: shown }),
    }
}

/// How a GET failed, before the URL is put into the message.
enum Failure {
    Status(String),
    TooLarge,
    Request(String),
    /// The host is, resolves to, or redirected to an address remote loads never reach.
    Refused(String),
    /// The request's own timeout fired, or the caller gave up: both at the timeout.
    TimedOut,
}

impl Failure {
    fn into_error(self, url: &str, shown: String, limit: u64, timeout: Duration) -> FetchError {
        match self {
            Failure::Status(status) => FetchError::Status { url: shown, status },
            Failure::TooLarge => FetchError::TooLarge { url: shown, limit },
            Failure::Request(message) => FetchError::Request {
                url: shown,
                message: scrub(&message, url),
            },
            Failure::Refused(reason) => FetchError::Refused { url: shown, reason },
            Failure::TimedOut => FetchError::Timeout {
                url: shown,
                timeout: goduration::format(timeout),
            },
        }
    }
}

fn request_error(error: reqwest::Error) -> Failure {
    if let Some(refusal) = guard::refusal_in(&error) {
        return Failure::Refused(refusal.to_string());
    }
    if error.is_timeout() {
        return Failure::TimedOut;
    }
    Failure::Request(crate::error::chain(&error.without_url()))
}

fn get(url: &str, timeout: Duration, max_bytes: u64, cancel: &Cancel) -> Result<Vec<u8>, Failure> {
    let client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .redirect(guard::redirect_policy(MAX_REDIRECTS))
        .dns_resolver(Arc::new(guard::GuardedResolver))
        .build()
        .map_err(request_error)?;
    let mut response = client.get(url).send().map_err(request_error)?;
    let status = response.status();
    if !status.is_success() {
        let text = match status.canonical_reason() {
            Some(reason) => format!("{} {reason}", status.as_u16()),
            None => status.as_u16().to_string(),
        };
        return Err(Failure::Status(text));
    }
    if response.content_length().is_some_and(|len| len > max_bytes) {
        return Err(Failure::TooLarge);
    }
    let mut body = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if cancel.is_cancelled() {
            return Err(Failure::TimedOut);
        }
        let n = match response.read(&mut chunk) {
            Ok(0) => return Ok(body),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Request(crate::error::chain(&e))),
        };
        if body.len() as u64 + n as u64 > max_bytes {
            return Err(Failure::TooLarge);
        }
        body.extend_from_slice(&chunk[..n]);
    }
}
