//! The Kubernetes client, with client-side rate limiting as client-go does it
//! (`--kube-api-qps`, `--kube-api-burst`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use kube::client::ClientBuilder;

use crate::metrics::RestRequests;
use kube::{Client, Config};
use tokio::time::Instant;
use tower::{Layer, Service};

/// A token bucket: `burst` requests at once, refilled at `qps` per second. Like Go's
/// `rate.Limiter.Reserve`, taking a token always succeeds and says how long the caller must
/// wait before using it, so that callers are served in order.
#[derive(Debug)]
pub struct TokenBucket {
    capacity: f64,
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f32, burst: u32) -> Self {
        let capacity = f64::from(burst.max(1));
        TokenBucket {
            capacity,
            tokens: capacity,
            rate: f64::from(qps),
            last: Instant::now(),
        }
    }

    /// Reserves a token and returns how long to wait before it may be used.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity) - 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// Layer that delays requests beyond the rate, with one bucket per API group and version.
///
/// That is the limit Flux's controller effectively has: controller-runtime gives every
/// group-version its own REST client, and client-go gives every REST client its own
/// `--kube-api-qps`/`--kube-api-burst` token bucket.
pub struct RateLimitLayer {
    qps: f32,
    burst: u32,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            qps: self.qps,
            burst: self.burst,
            buckets: HashMap::new(),
        }
    }
}

/// The rate-limited service. kube's client buffers requests in front of one instance of
/// it, so its buckets cover every request of the process.
pub struct RateLimit<S> {
    inner: S,
    qps: f32,
    burst: u32,
    buckets: HashMap<String, TokenBucket>,
}

/// `/api/v1` or `/apis/<group>/<version>`: the part of a request path that picks the REST
/// client in client-go.
fn group_version(path: &str) -> &str {
    let segments = if path.starts_with("/apis/") { 3 } else { 2 };
    let end = path
        .match_indices('/')
        .nth(segments)
        .map_or(path.len(), |(i, _)| i);
    &path[..end]
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let key = group_version(request.uri().path()).to_string();
        let (qps, burst) = (self.qps, self.burst);
        let wait = self
            .buckets
            .entry(key)
            .or_insert_with(|| TokenBucket::new(qps, burst))
            .reserve(Instant::now());
        let response = self.inner.call(request);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            response.await
        })
    }
}

/// The API server's message, without the Rust error around it: defined once, in the apply
/// engine that words its errors with it.
pub use apply::api_message;

/// Response header the API server sets when API Priority and Fairness handled a request.
const FLOW_SCHEMA_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";

/// Builds the client the way Flux's controller does: when the API server enforces API
/// Priority and Fairness (it answers `HEAD /livez/ping` with a flow schema header), there is
/// no client-side limit; otherwise requests are limited to `qps` per second with bursts of
/// `burst`, per API group-version. A `qps` of zero or less disables the limit.
/// Every request is counted in `requests` (`rest_client_requests_total`).
pub async fn build(
    config: Config,
    qps: f32,
    burst: u32,
    requests: &RestRequests,
) -> Result<Client, kube::Error> {
    let host = config
        .cluster_url
        .authority()
        .map(|authority| authority.as_str().to_string())
        .unwrap_or_default();
    let counted = requests.layer(&host);
    let unlimited = ClientBuilder::try_from(config.clone())?
        .with_layer(&counted)
        .build();
    if qps <= 0.0 || priority_and_fairness_enabled(&unlimited).await {
        tracing::debug!(
            "client-side rate limiting off: the API server enforces priority and fairness"
        );
        return Ok(unlimited);
    }
    tracing::debug!(qps, burst, "client-side rate limiting on");
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer { qps, burst })
        .with_layer(&counted)
        .build())
}

/// Whether the API server enforces API Priority and Fairness.
pub async fn priority_and_fairness_enabled(client: &Client) -> bool {
    let Ok(request) = Request::head("/livez/ping").body(Vec::new()) else {
        return false;
    };
    // Any answer counts, a 404 included: the header is set before routing.
    match client.send(request.map(kube::client::Body::from)).await {
        Ok(response) => response.headers().contains_key(FLOW_SCHEMA_HEADER),
        Err(kube::Error::Api(_)) => false,
        Err(err) => {
            tracing::debug!(error = %err, "could not tell whether the API server enforces priority and fairness");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_refills_at_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 3);
        bucket.last = start;
        for _ in 0..3 {
            assert_eq!(bucket.reserve(start), Duration::ZERO);
        }
        let wait = bucket.reserve(start);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // The next reservation queues behind the previous one.
        let wait = bucket.reserve(start);
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-9, "{wait:?}");
        assert_eq!(
            bucket.reserve(start + Duration::from_millis(300)),
            Duration::ZERO
        );
    }

    #[test]
    fn buckets_are_per_group_version() {
        assert_eq!(
            group_version("/api/v1/namespaces/a/configmaps/b"),
            "/api/v1"
        );
        assert_eq!(
            group_version("/apis/apps/v1/namespaces/a/deployments"),
            "/apis/apps/v1"
        );
        assert_eq!(group_version("/apis/apps/v1"), "/apis/apps/v1");
        assert_eq!(group_version("/version"), "/version");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_a_token() {
        use tower::ServiceExt;
        let service = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Instant::now())
        });
        let mut limited = RateLimitLayer { qps: 2.0, burst: 1 }.layer(service);
        let start = Instant::now();
        let mut at = Vec::new();
        for path in ["/api/v1/pods", "/apis/apps/v1/deployments", "/api/v1/pods"] {
            let request = Request::get(path).body(()).expect("request");
            at.push(limited.ready().await.unwrap().call(request).await.unwrap());
        }
        let (first, other_group, second) = (at[0], at[1], at[2]);
        assert_eq!(first, start);
        assert_eq!(
            other_group, start,
            "another group-version has its own bucket"
        );
        assert!(second.duration_since(start) >= Duration::from_millis(500));
    }
}
