//! controller-runtime's reconcile and workqueue families, fed by the reconcile loop. A
//! Kustomization is *queued* when kube-runtime hands it over (a watch event, or a requeue
//! falling due), *working* once it holds one of the `--concurrent` permits, and *done* when
//! its reconcile returns.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::CONTROLLER_NAME;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    controller: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    controller: String,
    name: String,
    priority: String,
}

/// How a reconcile ended, as controller-runtime's `result` label words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done until something changes.
    Success,
    /// To run again at once.
    Requeue,
    /// To run again after a delay (the interval, the retry interval, a dependency's wait).
    RequeueAfter,
    /// Failed, retried with backoff.
    Error,
    /// Failed in a way a retry cannot fix (an invalid spec): Flux's terminal errors.
    TerminalError,
    /// The reconcile panicked; the controller goes on.
    Panic,
}

impl Outcome {
    /// The outcome of a reconcile that asked to run again after `delay` (none: on change).
    pub fn of_requeue(delay: Option<Duration>) -> Self {
        match delay {
            None => Outcome::Success,
            Some(delay) if delay.is_zero() => Outcome::Requeue,
            Some(_) => Outcome::RequeueAfter,
        }
    }

    fn result(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Requeue => "requeue",
            Outcome::RequeueAfter => "requeue_after",
            Outcome::Error | Outcome::TerminalError | Outcome::Panic => "error",
        }
    }
}

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The workqueue's buckets: powers of ten from 10 ns to 1000 s.
fn queue_buckets() -> impl Iterator<Item = f64> {
    (0..12).map(|exponent| 10f64.powi(exponent - 8))
}

/// The reconcile and workqueue families, and the reconciles in flight.
#[derive(Clone)]
pub struct Reconciles {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram>,
    active_workers: Family<ControllerLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    depth: Family<DepthLabels, Gauge>,
    queue_duration: Family<QueueLabels, Histogram>,
    work_duration: Family<QueueLabels, Histogram>,
    unfinished_work: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    longest_running: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    in_flight: Arc<Mutex<HashMap<u64, Instant>>>,
    next_id: Arc<AtomicU64>,
}

fn controller() -> ControllerLabels {
    ControllerLabels {
        controller: CONTROLLER_NAME.into(),
    }
}

fn queue() -> QueueLabels {
    QueueLabels {
        controller: CONTROLLER_NAME.into(),
        name: CONTROLLER_NAME.into(),
    }
}

fn depth() -> DepthLabels {
    DepthLabels {
        controller: CONTROLLER_NAME.into(),
        name: CONTROLLER_NAME.into(),
        priority: "0".into(),
    }
}

impl Reconciles {
    /// Registers the families in `registry`, each with its series at zero as controller-runtime
    /// starts them.
    pub(super) fn register(registry: &mut Registry, max_concurrent_reconciles: usize) -> Self {
        let reconciles = Reconciles {
            total: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            time: Family::new_with_constructor(|| Histogram::new(RECONCILE_TIME_BUCKETS)),
            active_workers: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            depth: Family::default(),
            queue_duration: Family::new_with_constructor(|| Histogram::new(queue_buckets())),
            work_duration: Family::new_with_constructor(|| Histogram::new(queue_buckets())),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            in_flight: Arc::default(),
            next_id: Arc::default(),
        };
        let max_concurrent = Family::<ControllerLabels, Gauge>::default();
        max_concurrent
            .get_or_create(&controller())
            .set(i64::try_from(max_concurrent_reconciles).unwrap_or(i64::MAX));
        // Counters are registered without `_total`, which the encoder appends.
        let r = &reconciles;
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            r.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            r.errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            r.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            r.panics.clone(),
        );
        // controller-runtime's ReconciliationTimeout, which Flux does not set: no reconcile
        // is cut short, here either, so the series stays at zero.
        let timeouts = Family::<ControllerLabels, Counter>::default();
        let _ = timeouts.get_or_create(&controller());
        registry.register(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            timeouts,
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            r.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            r.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            max_concurrent,
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            r.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay \
             (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            r.retries.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            r.depth.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            r.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            r.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce \
             the number of stuck threads by observing the rate at which this increases.",
            r.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            r.longest_running.clone(),
        );
        for outcome in [
            Outcome::Error,
            Outcome::Requeue,
            Outcome::RequeueAfter,
            Outcome::Success,
        ] {
            let _ = reconciles.total.get_or_create(&ResultLabels {
                controller: CONTROLLER_NAME.into(),
                result: outcome.result().into(),
            });
        }
        for family in [
            &reconciles.errors,
            &reconciles.terminal_errors,
            &reconciles.panics,
        ] {
            let _ = family.get_or_create(&controller());
        }
        let _ = reconciles.active_workers.get_or_create(&controller());
        let _ = reconciles.adds.get_or_create(&queue());
        let _ = reconciles.retries.get_or_create(&queue());
        let _ = reconciles.depth.get_or_create(&depth());
        let _ = reconciles.queue_duration.get_or_create(&queue());
        let _ = reconciles.work_duration.get_or_create(&queue());
        reconciles.refresh_in_flight();
        reconciles
    }

    /// A Kustomization handed to the controller, waiting for a worker.
    pub fn queued(&self) -> Queued {
        self.adds.get_or_create(&queue()).inc();
        self.depth.get_or_create(&depth()).inc();
        Queued {
            reconciles: self.clone(),
            since: Instant::now(),
            started: false,
        }
    }

    /// Sets the gauges of work in progress from the reconciles in flight now.
    pub fn refresh_in_flight(&self) {
        let now = Instant::now();
        let (unfinished, longest) = self
            .in_flight
            .lock()
            .map(|in_flight| {
                in_flight
                    .values()
                    .map(|since| now.duration_since(*since).as_secs_f64())
                    .fold((0.0, 0.0), |(sum, max): (f64, f64), age| {
                        (sum + age, max.max(age))
                    })
            })
            .unwrap_or_default();
        self.unfinished_work.get_or_create(&queue()).set(unfinished);
        self.longest_running.get_or_create(&queue()).set(longest);
    }
}

/// A queued Kustomization; dropped without [`Queued::working`], it leaves the queue.
pub struct Queued {
    reconciles: Reconciles,
    since: Instant,
    started: bool,
}

impl Queued {
    /// The Kustomization got a worker: its reconcile runs from now on.
    pub fn working(mut self) -> Working {
        self.started = true;
        let r = &self.reconciles;
        r.depth.get_or_create(&depth()).dec();
        r.queue_duration
            .get_or_create(&queue())
            .observe(self.since.elapsed().as_secs_f64());
        r.active_workers.get_or_create(&controller()).inc();
        let id = r.next_id.fetch_add(1, Ordering::Relaxed);
        let since = Instant::now();
        if let Ok(mut in_flight) = r.in_flight.lock() {
            in_flight.insert(id, since);
        }
        Working {
            reconciles: r.clone(),
            since,
            id,
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.started {
            self.reconciles.depth.get_or_create(&depth()).dec();
        }
    }
}

/// A reconcile in progress; dropped without [`Working::done`] (cancelled at shutdown), it
/// stops counting as in progress.
pub struct Working {
    reconciles: Reconciles,
    since: Instant,
    id: u64,
}

impl Working {
    /// The reconcile returned with `outcome`.
    pub fn done(self, outcome: Outcome) {
        let r = &self.reconciles;
        let elapsed = self.since.elapsed().as_secs_f64();
        r.time.get_or_create(&controller()).observe(elapsed);
        r.work_duration.get_or_create(&queue()).observe(elapsed);
        r.total
            .get_or_create(&ResultLabels {
                controller: CONTROLLER_NAME.into(),
                result: outcome.result().into(),
            })
            .inc();
        match outcome {
            Outcome::Error => {
                r.errors.get_or_create(&controller()).inc();
            }
            Outcome::TerminalError => {
                r.errors.get_or_create(&controller()).inc();
                r.terminal_errors.get_or_create(&controller()).inc();
            }
            Outcome::Panic => {
                r.errors.get_or_create(&controller()).inc();
                r.panics.get_or_create(&controller()).inc();
            }
            Outcome::Success | Outcome::Requeue | Outcome::RequeueAfter => {}
        }
        if matches!(
            outcome,
            Outcome::Error | Outcome::Panic | Outcome::RequeueAfter
        ) {
            r.retries.get_or_create(&queue()).inc();
        }
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        let r = &self.reconciles;
        r.active_workers.get_or_create(&controller()).dec();
        if let Ok(mut in_flight) = r.in_flight.lock() {
            in_flight.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    #[test]
    fn series_start_at_zero_with_controller_runtime_labels() {
        let mut registry = Registry::default();
        Reconciles::register(&mut registry, 4);
        let text = render(&registry);
        for series in [
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"requeue_after\"} 0",
            "controller_runtime_reconcile_errors_total{controller=\"kustomization\"} 0",
            "controller_runtime_max_concurrent_reconciles{controller=\"kustomization\"} 4",
            "workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=\"0\"} 0",
            "workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 0",
        ] {
            assert!(text.contains(series), "{series} in\n{text}");
        }
    }

    #[test]
    fn a_reconcile_moves_from_the_queue_to_a_worker_and_counts_its_result() {
        let mut registry = Registry::default();
        let reconciles = Reconciles::register(&mut registry, 4);
        let queued = reconciles.queued();
        assert!(render(&registry).contains(
            "workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=\"0\"} 1"
        ));
        let working = queued.working();
        let text = render(&registry);
        assert!(text.contains("workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=\"0\"} 0"), "{text}");
        assert!(
            text.contains("controller_runtime_active_workers{controller=\"kustomization\"} 1"),
            "{text}"
        );
        working.done(Outcome::TerminalError);
        let text = render(&registry);
        for series in [
            "controller_runtime_active_workers{controller=\"kustomization\"} 0",
            "controller_runtime_reconcile_total{controller=\"kustomization\",result=\"error\"} 1",
            "controller_runtime_terminal_reconcile_errors_total{controller=\"kustomization\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"kustomization\"} 1",
            "workqueue_adds_total{controller=\"kustomization\",name=\"kustomization\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"kustomization\"} 1",
        ] {
            assert!(text.contains(series), "{series} in\n{text}");
        }
    }

    #[test]
    fn a_cancelled_wait_leaves_the_queue() {
        let mut registry = Registry::default();
        let reconciles = Reconciles::register(&mut registry, 1);
        drop(reconciles.queued());
        assert!(render(&registry).contains(
            "workqueue_depth{controller=\"kustomization\",name=\"kustomization\",priority=\"0\"} 0"
        ));
    }

    #[test]
    fn requeues_are_words_of_controller_runtime() {
        assert_eq!(Outcome::of_requeue(None), Outcome::Success);
        assert_eq!(Outcome::of_requeue(Some(Duration::ZERO)), Outcome::Requeue);
        assert_eq!(
            Outcome::of_requeue(Some(Duration::from_secs(600))),
            Outcome::RequeueAfter
        );
    }
}
