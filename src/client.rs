//! The Kubernetes client, with client-side rate limiting as client-go does it
//! (`--kube-api-qps`, `--kube-api-burst`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::{Client, Config};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A token bucket: `burst` requests at once, refilled at `qps` per second.
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

    /// Takes a token, or tells how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

/// Layer that delays requests beyond the bucket's rate.
pub struct RateLimitLayer {
    qps: f32,
    burst: u32,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: TokenBucket::new(self.qps, self.burst),
            sleep: None,
            permitted: false,
        }
    }
}

/// The rate-limited service. kube's client buffers requests in front of one instance of
/// it, so a single bucket covers every request of the process.
pub struct RateLimit<S> {
    inner: S,
    bucket: TokenBucket,
    sleep: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.permitted {
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(Future::poll(sleep.as_mut(), cx));
                self.sleep = None;
            }
            match self.bucket.try_take(Instant::now()) {
                Ok(()) => self.permitted = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

/// Builds a client from `config`, limited to `qps` requests per second with bursts of
/// `burst`. A `qps` of zero or less disables the limit.
pub fn build(config: Config, qps: f32, burst: u32) -> Result<Client, kube::Error> {
    let builder = ClientBuilder::try_from(config)?;
    if qps <= 0.0 {
        return Ok(builder.build());
    }
    Ok(builder.with_layer(&RateLimitLayer { qps, burst }).build())
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
            assert_eq!(bucket.try_take(start), Ok(()));
        }
        let wait = bucket.try_take(start).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(bucket.try_take(start + Duration::from_millis(100)), Ok(()));
        assert!(bucket.try_take(start + Duration::from_millis(150)).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_waits_for_a_token() {
        use tower::ServiceExt;
        let service =
            tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
        let mut limited = RateLimitLayer { qps: 2.0, burst: 1 }.layer(service);
        let start = Instant::now();
        let first = limited.ready().await.unwrap().call(()).await.unwrap();
        let second = limited.ready().await.unwrap().call(()).await.unwrap();
        assert_eq!(first, start);
        assert!(second.duration_since(start) >= Duration::from_millis(500));
    }
}
