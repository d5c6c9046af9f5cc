//! client-go's `rest_client_requests_total{code, host, method}`: every request any of the
//! controller's clients makes, counted when its response (or transport error) arrives.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    host: String,
    method: String,
}

/// The request counter, shared by every client.
#[derive(Clone, Debug, Default)]
pub struct RestRequests(Family<RequestLabels, Counter>);

impl RestRequests {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let requests = RestRequests::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            requests.0.clone(),
        );
        requests
    }

    /// The layer that counts the requests of a client of the API server at `host`
    /// (`host:port`, as client-go labels it).
    pub fn layer(&self, host: &str) -> RestClientLayer {
        RestClientLayer {
            requests: self.clone(),
            host: host.into(),
        }
    }
}

/// Counts the requests of one client.
#[derive(Clone)]
pub struct RestClientLayer {
    requests: RestRequests,
    host: Arc<str>,
}

impl<S> Layer<S> for RestClientLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> CountRequests<S> {
        CountRequests {
            inner,
            requests: self.requests.clone(),
            host: Arc::clone(&self.host),
        }
    }
}

/// The service [`RestClientLayer`] wraps a client's stack in.
#[derive(Clone)]
pub struct CountRequests<S> {
    inner: S,
    requests: RestRequests,
    host: Arc<str>,
}

impl<S, B, R> Service<Request<B>> for CountRequests<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let requests = self.requests.clone();
        let host = self.host.to_string();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(response) => response.status().as_u16().to_string(),
                // client-go's label for a request that got no response.
                Err(_) => "<error>".to_string(),
            };
            requests
                .0
                .get_or_create(&RequestLabels { code, host, method })
                .inc();
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn responses_are_counted_by_code_method_and_host() {
        let mut registry = Registry::default();
        let requests = RestRequests::register(&mut registry);
        let service = tower::service_fn(|request: Request<()>| async move {
            let status = if request.method() == http::Method::GET {
                404
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .status(status)
                    .body(())
                    .expect("response"),
            )
        });
        let mut counted = requests.layer("127.0.0.1:6443").layer(service);
        for method in [http::Method::GET, http::Method::GET, http::Method::PATCH] {
            let request = Request::builder().method(method).body(()).expect("request");
            counted.call(request).await.expect("response");
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"404\",host=\"127.0.0.1:6443\",method=\"GET\"} 2"
            ),
            "{text}"
        );
        assert!(text.contains("rest_client_requests_total{code=\"200\",host=\"127.0.0.1:6443\",method=\"PATCH\"} 1"), "{text}");
    }
}
