//! Prometheus metrics, named, typed and labelled as Flux's kustomize-controller exposes them:
//! Flux's own `gotk_reconcile_duration_seconds`, controller-runtime's reconcile and workqueue
//! families, client-go's `rest_client_requests_total`, and the `process_*` family of the Go
//! client library's process collector.

mod process;
mod reconciles;
mod rest_client;
mod token_cache;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::registry::Registry;

pub use reconciles::{Outcome, Queued, Reconciles, Working};
pub use rest_client::{RestClientLayer, RestRequests};
pub use token_cache::{InvolvedObject, TokenCacheMetrics};

/// The name controller-runtime gives the Kustomization controller, in the `controller` and
/// `name` labels.
pub const CONTROLLER_NAME: &str = "kustomization";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    name: String,
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// Flux's labels of a metric about one Kustomization.
fn kustomization_labels(namespace: &str, name: &str) -> ReconcileLabels {
    ReconcileLabels {
        kind: "Kustomization".into(),
        name: name.into(),
        namespace: namespace.into(),
    }
}

/// Buckets of `gotk_reconcile_duration_seconds`: Flux's ten exponential buckets from 10 ms
/// to 30 minutes.
fn gotk_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets_range(0.01, 1800.0, 10)
}

/// The controller's metrics and their registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconcile_duration: Family<ReconcileLabels, Histogram>,
    drift_detected: Family<ReconcileLabels, Counter>,
    drift_corrections: Family<ReconcileLabels, Counter>,
    leader: Family<LeaseLabels, Gauge>,
    /// controller-runtime's reconcile and workqueue families.
    pub reconciles: Reconciles,
    /// client-go's request counter, shared by every client the controller builds.
    pub rest_requests: RestRequests,
    /// The token cache's `gotk_token_` families.
    pub token_cache: TokenCacheMetrics,
}

impl Metrics {
    /// The registry with every family; `max_concurrent_reconciles` is `--concurrent`.
    pub fn new(max_concurrent_reconciles: usize) -> Self {
        let mut registry = Registry::default();
        let reconcile_duration = Family::<ReconcileLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(gotk_buckets())
        });
        registry.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation.",
            reconcile_duration.clone(),
        );
        let drift_detected = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "gotk_drift_detected",
            "Drift of objects a Kustomization applied: writes by other managers seen as they happen (prompt drift correction), or each distinct set of drifted objects reported (drift-detection: warn).",
            drift_detected.clone(),
        );
        let drift_corrections = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "gotk_drift_corrections",
            "Reconciles started promptly to correct drift of objects a Kustomization applied.",
            drift_corrections.clone(),
        );
        let leader = Family::<LeaseLabels, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            leader.clone(),
        );
        let reconciles = Reconciles::register(&mut registry, max_concurrent_reconciles);
        let rest_requests = RestRequests::register(&mut registry);
        let token_cache = TokenCacheMetrics::register(&mut registry);
        registry.register_collector(Box::new(process::ProcessCollector));
        Metrics {
            registry: Arc::new(registry),
            reconcile_duration,
            drift_detected,
            drift_corrections,
            leader,
            reconciles,
            rest_requests,
            token_cache,
        }
    }

    /// Records how long a reconcile of a Kustomization took.
    pub fn observe_reconcile(&self, namespace: &str, name: &str, elapsed: Duration) {
        let labels = kustomization_labels(namespace, name);
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts drift of objects Kustomization `namespace/name` applied: a write by another
    /// manager (prompt correction), or a new set of drifted objects reported (warn mode).
    pub fn count_drift(&self, namespace: &str, name: &str) {
        self.drift_detected
            .get_or_create(&kustomization_labels(namespace, name))
            .inc();
    }

    /// Counts a reconcile started to correct drift of Kustomization `namespace/name`.
    pub fn count_drift_correction(&self, namespace: &str, name: &str) {
        self.drift_corrections
            .get_or_create(&kustomization_labels(namespace, name))
            .inc();
    }

    /// Records whether this replica holds the leader election Lease `lease`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels { name: lease.into() })
            .set(i64::from(leading));
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        self.reconciles.refresh_in_flight();
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_duration_is_exposed_with_flux_labels_and_buckets() {
        let metrics = Metrics::default();
        metrics.observe_reconcile("flux-system", "apps", Duration::from_millis(300));
        let text = metrics.render();
        assert!(text.contains("gotk_reconcile_duration_seconds_count{kind=\"Kustomization\",name=\"apps\",namespace=\"flux-system\"} 1"), "{text}");
        metrics.count_drift("flux-system", "apps");
        metrics.count_drift_correction("flux-system", "apps");
        let text = metrics.render();
        for family in ["gotk_drift_detected_total", "gotk_drift_corrections_total"] {
            let line = format!(
                "{family}{{kind=\"Kustomization\",name=\"apps\",namespace=\"flux-system\"}} 1"
            );
            assert!(text.contains(&line), "{text}");
        }
        let buckets: Vec<f64> = gotk_buckets().collect();
        assert_eq!(buckets.len(), 10);
        assert!(
            (buckets[1] - 0.038_363_583_488_692_544).abs() < 1e-12,
            "{buckets:?}"
        );
        assert!((buckets[9] - 1800.0).abs() < 1e-6, "{buckets:?}");
    }

    #[test]
    fn leader_status_is_labelled_with_the_lease() {
        let metrics = Metrics::default();
        metrics.set_leader("kustomize-controller-leader-election", true);
        assert!(
            metrics.render().contains(
                "leader_election_master_status{name=\"kustomize-controller-leader-election\"} 1"
            ),
            "{}",
            metrics.render()
        );
    }
}
