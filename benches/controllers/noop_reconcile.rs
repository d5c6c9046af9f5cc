//! `--scenario noop`: what a reconcile that changes nothing costs. One Kustomization of
//! `--objects` objects (1000 by default, mostly ConfigMaps) is applied once, then reconciled
//! `--reconciles` times, one after the other, with the `reconcile.fluxcd.io/requestedAt`
//! annotation and nothing to change; then once more after [`EDITED`] of its ConfigMaps were
//! edited in the cluster the way `kubectl edit` edits them, which the reconcile must revert.
//! Per reconcile: the wall time from the annotation patch to `status.lastHandledReconcileAt`
//! showing it with Ready=True, and the controller's API requests by verb and resource and per
//! object. Then `--periodic` reconciles that nobody requests (`spec.interval` set to
//! `--periodic-interval`): their duration from `status.history` and their requests.

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;

/// The annotation that requests a reconcile (Flux's `meta.ReconcileRequestAnnotation`).
const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// How many ConfigMaps the drift reconcile finds edited.
const EDITED: usize = 10;

/// The field manager of `kubectl edit`.
const EDIT_MANAGER: &str = "kubectl-edit";

/// The value an edit writes into `data.value`.
const EDITED_VALUE: &str = "edited";

/// How long to wait after a reconcile was seen handled before reading the counters, so that
/// requests the controller makes after its last status patch (events) count for this
/// reconcile and not the next one.
const SETTLE: Duration = Duration::from_secs(2);

/// An idle window, measured before the first reconcile: the requests other clients (and the
/// bench's watch) make while nothing is requested, i.e. the noise in the per-reconcile counts.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// How often the watched Kustomization is looked at while a reconcile runs.
const POLL: Duration = Duration::from_millis(10);

/// One requested reconcile, measured.
pub(super) struct Reconcile {
    /// Annotation patch -> handled with Ready=True; `None` on timeout.
    pub seconds: Option<f64>,
    /// The controller's requests from just before the patch to [`SETTLE`] after it was
    /// handled.
    pub requests: BTreeMap<RequestKey, u64>,
    /// The controller's CPU seconds over the same span.
    pub cpu: f64,
    /// kube-apiserver's and etcd's CPU seconds over the same span.
    pub control_plane_cpu: f64,
    /// The span's length in seconds.
    pub window: f64,
}

impl Reconcile {
    /// Measured between two checkpoints.
    fn between(seconds: Option<f64>, start: &Checkpoint, end: &Checkpoint) -> Self {
        Reconcile {
            seconds,
            requests: controller_requests(start, end),
            cpu: end.cpu - start.cpu,
            control_plane_cpu: start.control_plane_cpu_until(end),
            window: end.at.duration_since(start.at).as_secs_f64(),
        }
    }

    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// The controller's CPU plus kube-apiserver's and etcd's, in milliseconds, less what
    /// kube-apiserver and etcd spend with nothing to do (`idle`, CPU seconds per second) over
    /// the span.
    pub fn cost_ms(&self, idle: f64) -> f64 {
        let control_plane = (self.control_plane_cpu - idle * self.window).max(0.0);
        (self.cpu + control_plane) * 1000.0
    }
}

impl Bench<'_> {
    /// Measures one implementation once in the `noop` scenario.
    pub async fn run_noop(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout_of(implementation, index, 1, 1);
        let objects = self.args.objects();
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: one Kustomization of {objects} objects, {} no-op \
             reconcile(s) and one after {EDITED} edits (run id {})",
            implementation.name, self.args.reconciles, layout.run
        );
        self.prepare(&layout).await;
        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;
        if let Some((ns, name)) = layout.kustomizations.first() {
            self.measure_noop(&layout, ns, name, &controller, &mut result)
                .await;
        }
        self.clean_up(&layout, &mut controller, &mut result).await;
        self.wait_until_gone(&layout, &mut result).await;
        result
    }

    /// Applies the Kustomization `ns/name`, then measures the no-op reconciles and the drift
    /// reconcile; writes the request breakdown next to the controller's log.
    async fn measure_noop(
        &self,
        layout: &Layout,
        ns: &str,
        name: &str,
        controller: &Controller,
        result: &mut RunResult,
    ) {
        let objects = self.args.objects();
        let expected = revision(&layout.run, 1);
        let before = self.checkpoint(&[controller.pid()]);
        let started = Instant::now();
        self.create_kustomization(ns, name, &layout.run).await;
        let applied = self
            .wait_until(&layout.run, 1, &expected, started, controller)
            .await;
        let created = Reconcile::between(
            applied.as_ref().ok().map(Duration::as_secs_f64),
            &before,
            &self.checkpoint(&[controller.pid()]),
        );
        result.push(
            &format!("(noop) create -> Ready: first apply of {objects} objects [s]"),
            created.seconds,
            2,
        );
        if let Err(e) = applied {
            result.note(format!("noop: the first apply timed out: {e}"));
            return;
        }
        self.verify(layout, objects, "(noop) create", result).await;
        tokio::time::sleep(SETTLE).await;

        let pid = controller.pid();
        let idle_start = self.checkpoint(&[pid]);
        tokio::time::sleep(IDLE_WINDOW).await;
        let idle_end = self.checkpoint(&[pid]);
        let idle = controller_requests(&idle_start, &idle_end);
        let idle_cpu = idle_start.control_plane_cpu_until(&idle_end)
            / idle_end.at.duration_since(idle_start.at).as_secs_f64();

        let mut noops = Vec::new();
        for k in 1..=self.args.reconciles {
            let reconcile = self
                .requested_reconcile(layout, ns, name, &format!("noop-{k}"), controller)
                .await;
            eprintln!(
                "bench: no-op reconcile {k}: {} in {:.3?} s",
                reconcile.total(),
                reconcile.seconds
            );
            noops.push(reconcile);
        }
        let edited = self.edit_config_maps(ns, name, result).await;
        let drift = self
            .requested_reconcile(layout, ns, name, "drift", controller)
            .await;
        eprintln!(
            "bench: drift reconcile: {} in {:.3?} s",
            drift.total(),
            drift.seconds
        );
        let reverted = self.count_reverted(ns, &edited).await;
        if reverted < edited.len() {
            result.note(format!(
                "drift: {} of the {} edited ConfigMaps still differ from the source after the \
                 reconcile",
                edited.len() - reverted,
                edited.len()
            ));
        }
        self.verify(layout, objects, "(drift)", result).await;
        let periodic = self.periodic_reconciles(layout, ns, name, controller).await;

        record_noop(&noops, &drift, reverted, &idle, objects, result);
        record_periodic(&periodic, objects, result);
        record_costs(&created, &noops, &drift, &periodic, idle_cpu, result);
        let path = self.work_dir.join(&layout.run).join("requests.txt");
        write_noop_breakdown(&noops, &drift, &idle, &path);
    }

    /// Sets `spec.interval` to `--periodic-interval` and measures `--periodic` reconciles that
    /// nobody requests: each one's duration as the controller records it in
    /// `status.history[0].lastReconciledDuration`, and its API requests, counted from
    /// [`SETTLE`] after the reconcile before it was seen to [`SETTLE`] after it was seen.
    async fn periodic_reconciles(
        &self,
        layout: &Layout,
        ns: &str,
        name: &str,
        controller: &Controller,
    ) -> Vec<Reconcile> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
        let patch = json!({"spec": {"interval": self.args.periodic_interval}});
        self.own("PATCH", "kustomizations", 1);
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("set the interval of {ns}/{name}: {e}"));
        let interval = kustomize_controller::api::duration::parse(&self.args.periodic_interval)
            .unwrap_or(Duration::from_secs(30));
        let pid = controller.pid();
        // The spec change itself reconciles; the measured ones are the periodic ones after it.
        let mut seen = self
            .next_reconcile(layout, None, interval * 3, controller)
            .await;
        let mut measured = Vec::new();
        for k in 1..=self.args.periodic {
            tokio::time::sleep(SETTLE).await;
            let start = self.checkpoint(&[pid]);
            let next = self
                .next_reconcile(layout, seen, interval * 3, controller)
                .await;
            tokio::time::sleep(SETTLE).await;
            let end = self.checkpoint(&[pid]);
            let reconcile = Reconcile::between(next.and_then(|(_, seconds)| seconds), &start, &end);
            eprintln!(
                "bench: periodic reconcile {k}: {} requests, {:.3?} s",
                reconcile.total(),
                reconcile.seconds
            );
            measured.push(reconcile);
            seen = next.or(seen);
        }
        measured
    }

    /// Waits until the run's Kustomization records a reconcile after `seen` (its
    /// `totalReconciliations` in `status.history[0]`); returns that count and the
    /// reconcile's recorded duration.
    async fn next_reconcile(
        &self,
        layout: &Layout,
        seen: Option<(i64, Option<f64>)>,
        timeout: Duration,
        controller: &Controller,
    ) -> Option<(i64, Option<f64>)> {
        let deadline = Instant::now() + timeout;
        let first = seen.map(|(count, _)| count).unwrap_or_else(|| {
            self.matching(&layout.run)
                .first()
                .and_then(|ks| ks.data["status"]["history"][0]["totalReconciliations"].as_i64())
                .unwrap_or(0)
        });
        loop {
            let latest = self.matching(&layout.run).first().and_then(|ks| {
                let entry = &ks.data["status"]["history"][0];
                let count = entry["totalReconciliations"].as_i64()?;
                let seconds = entry["lastReconciledDuration"]
                    .as_str()
                    .and_then(|d| kustomize_controller::api::duration::parse(d).ok())
                    .map(|d| d.as_secs_f64());
                Some((count, seconds))
            });
            if let Some(latest) = latest.filter(|(count, _)| *count > first) {
                return Some(latest);
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "bench: no periodic reconcile seen; controller log tail:\n{}",
                    controller.log_tail(10)
                );
                return None;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Requests a reconcile of `ns/name` (a new `requestedAt` value) and waits until it is
    /// handled: `status.lastHandledReconcileAt` equals the new value and Ready=True with the
    /// applied revision 1. Then waits [`SETTLE`] before reading the counters.
    pub(super) async fn requested_reconcile(
        &self,
        layout: &Layout,
        ns: &str,
        name: &str,
        tag: &str,
        controller: &Controller,
    ) -> Reconcile {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let value = format!("{tag}-{nanos}");
        let pid = controller.pid();
        let start = self.checkpoint(&[pid]);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
        let patch = json!({"metadata": {"annotations": {REQUESTED_AT: value}}});
        self.own("PATCH", "kustomizations", 1);
        let requested = Instant::now();
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("annotate Kustomization {ns}/{name}: {e}"));
        let handled = self
            .wait_handled(layout, &value, requested, controller)
            .await;
        if let Err(e) = &handled {
            eprintln!("bench: reconcile {tag} not handled: {e}");
        }
        tokio::time::sleep(SETTLE).await;
        let end = self.checkpoint(&[pid]);
        Reconcile::between(handled.ok().map(|d| d.as_secs_f64()), &start, &end)
    }

    /// Polls the watched Kustomization of the run every [`POLL`] until it has handled the
    /// reconcile request `value` and is Ready with the applied revision 1; returns the time
    /// since `requested`.
    async fn wait_handled(
        &self,
        layout: &Layout,
        value: &str,
        requested: Instant,
        controller: &Controller,
    ) -> Result<Duration, String> {
        let expected = format!("Applied revision: {}", revision(&layout.run, 1));
        let deadline = requested + self.timeout();
        loop {
            let handled = self.matching(&layout.run).iter().any(|ks| {
                let at = ks.data["status"]["lastHandledReconcileAt"].as_str();
                at == Some(value)
                    && ready(ks)
                        .is_some_and(|(status, _, message)| status == "True" && message == expected)
            });
            if handled {
                return Ok(requested.elapsed());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{value} not handled; controller log tail:\n{}",
                    controller.log_tail(10)
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Edits [`EDITED`] of the Kustomization's ConfigMaps, spread over the artifact, as
    /// `kubectl edit` would: a merge patch of `data.value` by the field manager `kubectl-edit`.
    /// Returns the names of those it edited.
    async fn edit_config_maps(&self, ns: &str, name: &str, result: &mut RunResult) -> Vec<String> {
        let kinds = self.args.object_kinds();
        let positions: Vec<u64> = (0..self.args.objects())
            .filter(|i| artifacts::kind(kinds, *i) == "ConfigMap")
            .collect();
        let step = (positions.len() / EDITED).max(1);
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), ns);
        let params = PatchParams {
            field_manager: Some(EDIT_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let patch = json!({"data": {"value": EDITED_VALUE}});
        let mut edited = Vec::new();
        for position in positions.iter().step_by(step).take(EDITED) {
            let object = format!("{name}-{position}");
            self.own("PATCH", "configmaps", 1);
            match api.patch(&object, &params, &Patch::Merge(&patch)).await {
                Ok(_) => edited.push(object),
                Err(e) => result.note(format!("drift: cannot edit ConfigMap {ns}/{object}: {e}")),
            }
        }
        edited
    }

    /// How many of the ConfigMaps `names` in `ns` hold the source's value again.
    async fn count_reverted(&self, ns: &str, names: &[String]) -> usize {
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), ns);
        let mut reverted = 0;
        for name in names {
            self.own("GET", "configmaps", 1);
            let position = name
                .rsplit_once('-')
                .and_then(|(_, i)| i.parse::<u64>().ok());
            let value = api
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|cm| cm.data)
                .and_then(|data| data.get("value").cloned());
            if let (Some(value), Some(position)) = (value, position)
                && value == artifacts::config_map_value(position, 1)
            {
                reverted += 1;
            }
        }
        reverted
    }
}

/// Adds the no-op and drift figures to `result`, in table order.
fn record_noop(
    noops: &[Reconcile],
    drift: &Reconcile,
    reverted: usize,
    idle: &BTreeMap<RequestKey, u64>,
    objects: u64,
    result: &mut RunResult,
) {
    let per_object = |r: &Reconcile| r.total() as f64 / objects as f64;
    for (k, reconcile) in noops.iter().enumerate() {
        result.push(
            &format!("(no-op {}) requestedAt -> handled [s]", k + 1),
            reconcile.seconds,
            3,
        );
    }
    let seconds: Option<Vec<f64>> = noops.iter().map(|r| r.seconds).collect();
    result.push(NOOP_SECONDS, seconds.and_then(|s| median_of(&s)), 3);
    for (k, reconcile) in noops.iter().enumerate() {
        result.push_count(
            &format!("(no-op {}) API requests", k + 1),
            reconcile.total(),
        );
    }
    let per_objects: Vec<f64> = noops.iter().map(per_object).collect();
    result.push(NOOP_PER_OBJECT, median_of(&per_objects), 3);
    let cpu: Vec<f64> = noops.iter().map(|r| r.cpu).collect();
    result.push("(no-op) controller CPU, median [s]", median_of(&cpu), 2);
    let mut keys: Vec<&RequestKey> = noops.iter().flat_map(|r| r.requests.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let counts: Vec<f64> = noops
            .iter()
            .map(|r| r.requests.get(key).copied().unwrap_or(0) as f64)
            .collect();
        if let Some(count) = median_of(&counts).filter(|c| *c > 0.0) {
            result.push_counted(
                &format!("(no-op) API requests, median: {} {}", key.0, key.1),
                count,
                if count.fract() == 0.0 { 0 } else { 1 },
            );
        }
    }

    result.push(DRIFT_SECONDS, drift.seconds, 3);
    result.push_count("(drift) API requests", drift.total());
    result.push(DRIFT_PER_OBJECT, Some(per_object(drift)), 3);
    result.push("(drift) controller CPU [s]", Some(drift.cpu), 2);
    for ((verb, resource), count) in &drift.requests {
        result.push_count(&format!("(drift) API requests: {verb} {resource}"), *count);
    }
    result.push_count(
        &format!("(drift) edited ConfigMaps back at the source's value (of {EDITED})"),
        reverted as u64,
    );
    result.push_count(
        &format!(
            "API requests in {} s with nothing requested (other clients: noise)",
            IDLE_WINDOW.as_secs()
        ),
        idle.values().sum(),
    );
}

/// Records the cost of each kind of reconcile of the one Kustomization (the medians of the
/// no-op and periodic ones): controller CPU plus kube-apiserver's and etcd's, less their
/// `idle` CPU rate over each span (a periodic reconcile's span is most of an interval).
fn record_costs(
    created: &Reconcile,
    noops: &[Reconcile],
    drift: &Reconcile,
    periodic: &[Reconcile],
    idle: f64,
    result: &mut RunResult,
) {
    let cost = |r: &Reconcile| r.cost_ms(idle);
    let controller = |r: &Reconcile| r.cpu * 1000.0;
    let median = |reconciles: &[Reconcile], of: &dyn Fn(&Reconcile) -> f64| {
        median_of(&reconciles.iter().map(of).collect::<Vec<f64>>())
    };
    let kinds: [(&str, Option<f64>, Option<f64>); 4] = [
        ("(create)", Some(cost(created)), Some(controller(created))),
        (
            "(no-op, median)",
            median(noops, &cost),
            median(noops, &controller),
        ),
        ("(drift)", Some(cost(drift)), Some(controller(drift))),
        (
            "(periodic, median)",
            median(periodic, &cost),
            median(periodic, &controller),
        ),
    ];
    result.push(
        "kube-apiserver + etcd CPU with nothing requested, subtracted from the costs [ms/s]",
        Some(idle * 1000.0),
        1,
    );
    for (kind, total, controller) in kinds {
        result.push(
            &format!("cost per reconcile {kind}: controller + kube-apiserver + etcd CPU [ms]"),
            total,
            1,
        );
        result.push(
            &format!("cost per reconcile {kind}: of which the controller's CPU [ms]"),
            controller,
            1,
        );
    }
}

/// Records the periodic reconciles: duration and requests (per object), medians.
fn record_periodic(periodic: &[Reconcile], objects: u64, result: &mut RunResult) {
    let seconds: Vec<f64> = periodic.iter().filter_map(|r| r.seconds).collect();
    result.push(PERIODIC_SECONDS, median_of(&seconds), 3);
    let totals: Vec<f64> = periodic.iter().map(|r| r.total() as f64).collect();
    result.push("(periodic) API requests, median", median_of(&totals), 0);
    let per_object: Vec<f64> = totals.iter().map(|t| t / objects as f64).collect();
    result.push(PERIODIC_PER_OBJECT, median_of(&per_object), 3);
    let cpu: Vec<f64> = periodic.iter().map(|r| r.cpu).collect();
    result.push("(periodic) controller CPU, median [s]", median_of(&cpu), 2);
}

/// The median duration of the periodic reconciles, from `status.history`.
const PERIODIC_SECONDS: &str = "(periodic) reconcile duration (status.history), median [s]";
/// The median of the periodic reconciles' API requests per object.
const PERIODIC_PER_OBJECT: &str = "(periodic) API requests per object, median";

/// The median of the no-op reconciles' wall times.
const NOOP_SECONDS: &str = "(no-op) requestedAt -> handled, median [s]";
/// The median of the no-op reconciles' API requests per object.
const NOOP_PER_OBJECT: &str = "(no-op) API requests per object, median";
/// The drift reconcile's wall time ([`EDITED`] ConfigMaps edited).
const DRIFT_SECONDS: &str = "(drift) 10 ConfigMaps edited: requestedAt -> handled [s]";
/// The drift reconcile's API requests per object.
const DRIFT_PER_OBJECT: &str = "(drift) API requests per object";

/// The scenario's headline figures and the team's goals for them: at most one API request per
/// object for a no-op reconcile, and at most 0.3 x Flux's wall time.
pub fn headlines() -> Vec<Headline> {
    let headline = |metric: &str, goal| Headline {
        metric: metric.to_string(),
        goal,
    };
    vec![
        headline(NOOP_SECONDS, Goal::FractionOfFlux(0.3)),
        headline(NOOP_PER_OBJECT, Goal::AtMost(1.0)),
        headline(PERIODIC_SECONDS, Goal::FractionOfFlux(0.3)),
        headline(PERIODIC_PER_OBJECT, Goal::AtMost(1.0)),
        headline(DRIFT_SECONDS, Goal::None),
        headline(DRIFT_PER_OBJECT, Goal::None),
    ]
}

/// The median of `values`, `None` if there are none.
fn median_of(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n.is_multiple_of(2) => Some((sorted[mid - 1] + sorted[mid]) / 2.0),
        _ => Some(sorted[mid]),
    }
}

/// Writes every reconcile's requests per (verb, resource), and the idle window's, to `path`.
fn write_noop_breakdown(
    noops: &[Reconcile],
    drift: &Reconcile,
    idle: &BTreeMap<RequestKey, u64>,
    path: &std::path::Path,
) {
    let mut text = format!(
        "idle {} s (nothing requested)\n{}",
        IDLE_WINDOW.as_secs(),
        breakdown(idle)
    );
    for (k, reconcile) in noops.iter().enumerate() {
        text.push_str(&format!(
            "\nno-op {}\n{}",
            k + 1,
            breakdown(&reconcile.requests)
        ));
    }
    text.push_str(&format!(
        "\ndrift ({EDITED} ConfigMaps edited)\n{}",
        breakdown(&drift.requests)
    ));
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("bench: cannot write {}: {e}", path.display());
    }
}
