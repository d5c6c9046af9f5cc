//! The token cache's families, as Flux's `pkg/cache` registers them with the `gotk_token_`
//! prefix: hits and misses per Kustomization and operation, items held, requests by outcome,
//! evictions.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use keyservice::token_cache::InvolvedObject;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event_type: &'static str,
    kind: &'static str,
    name: String,
    namespace: String,
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

/// The `gotk_token_` families.
#[derive(Clone, Default)]
pub struct TokenCacheMetrics {
    events: Family<EventLabels, Counter>,
    items: Gauge,
    requests: Family<StatusLabels, Counter>,
    evictions: Counter,
}

impl TokenCacheMetrics {
    /// Registers the families.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = TokenCacheMetrics::default();
        registry.register(
            "gotk_token_cache_events",
            "Total number of cache retrieval events for a Gitops Toolkit resource reconciliation.",
            metrics.events.clone(),
        );
        registry.register(
            "gotk_token_cached_items",
            "Total number of items in the cache.",
            metrics.items.clone(),
        );
        registry.register(
            "gotk_token_cache_requests",
            "Total number of cache requests partioned by success or failure.",
            metrics.requests.clone(),
        );
        registry.register(
            "gotk_token_cache_evictions",
            "Total number of cache evictions.",
            metrics.evictions.clone(),
        );
        metrics
    }

    /// One lookup: a hit or a miss for `object`, and whether it ended with a token.
    pub fn record(&self, object: &InvolvedObject, hit: bool, success: bool) {
        self.events
            .get_or_create(&EventLabels {
                event_type: if hit { "cache_hit" } else { "cache_miss" },
                kind: "Kustomization",
                name: object.name.clone(),
                namespace: object.namespace.clone(),
                operation: object.operation,
            })
            .inc();
        self.requests
            .get_or_create(&StatusLabels {
                status: if success { "success" } else { "failure" },
            })
            .inc();
    }

    /// The number of items held.
    pub fn set_items(&self, items: usize) {
        self.items.set(i64::try_from(items).unwrap_or(i64::MAX));
    }

    /// One item evicted to make room.
    pub fn evicted(&self) {
        self.evictions.inc();
    }
}

impl keyservice::token_cache::CacheMetrics for TokenCacheMetrics {
    fn record(&self, object: &InvolvedObject, hit: bool, success: bool) {
        TokenCacheMetrics::record(self, object, hit, success);
    }

    fn set_items(&self, items: usize) {
        TokenCacheMetrics::set_items(self, items);
    }

    fn evicted(&self) {
        TokenCacheMetrics::evicted(self);
    }
}
