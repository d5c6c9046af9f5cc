//! Prometheus metrics, named as Flux names them.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    name: String,
    namespace: String,
}

/// Buckets of controller-runtime's reconcile time histogram, in seconds.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The controller's metrics and their registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconcile_duration: Family<ReconcileLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let reconcile_duration =
            Family::<ReconcileLabels, Histogram>::new_with_constructor(|| Histogram::new(BUCKETS));
        let mut registry = Registry::default();
        registry.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation.",
            reconcile_duration.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            reconcile_duration,
        }
    }
}

impl Metrics {
    /// Records how long a reconcile of a Kustomization took.
    pub fn observe_reconcile(&self, namespace: &str, name: &str, elapsed: Duration) {
        let labels = ReconcileLabels {
            kind: "Kustomization".into(),
            name: name.into(),
            namespace: namespace.into(),
        };
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_duration_is_exposed_with_flux_labels() {
        let metrics = Metrics::default();
        metrics.observe_reconcile("flux-system", "apps", Duration::from_millis(300));
        let text = metrics.render();
        assert!(text.contains("gotk_reconcile_duration_seconds_count{kind=\"Kustomization\",name=\"apps\",namespace=\"flux-system\"} 1"), "{text}");
    }
}
