//! `--scenario failing-neighbours`: N healthy Kustomizations (ConfigMaps) share the controller
//! with `--failing` Kustomizations whose Deployment never becomes ready (`wait: true`,
//! `timeout: 2m`; the bench's cluster runs no kube-controller-manager, so no Deployment rolls
//! out). Measures a new revision on the healthy ones -> all Ready twice: alone, then while the
//! failing ones wait on their health checks. Fairness is how little the second exceeds the
//! first.

use super::*;
use crate::args::ObjectKinds;

/// How long a failing Kustomization's health check waits (`spec.timeout`).
const FAILING_TIMEOUT: &str = "2m";

impl Bench<'_> {
    /// Measures one implementation once in the `failing-neighbours` scenario.
    pub async fn run_failing_neighbours(
        &self,
        implementation: &Implementation,
        index: u64,
    ) -> RunResult {
        let layout = self.layout(implementation, index);
        let failing_run = format!("{}-failing", layout.run);
        let failing: Vec<(String, String)> = (0..self.args.failing)
            .map(|i| {
                let ns = layout.namespaces[i % layout.namespaces.len()].clone();
                (ns, format!("failing-{i}"))
            })
            .collect();
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: {} healthy Kustomizations x {} objects beside {} failing \
             ones (run id {})",
            implementation.name,
            layout.kustomizations.len(),
            self.args.objects(),
            failing.len(),
            layout.run
        );
        self.prepare(&layout).await;
        for (ns, name) in &failing {
            self.create_git_repository(ns, name).await;
            // A ConfigMap, a headless Service and a Deployment: the Deployment never rolls out.
            let files = artifacts::manifests(ns, name, &failing_run, 3, ObjectKinds::Mixed, 1);
            self.publish_files(ns, name, &revision(&layout.run, 1), &files)
                .await;
        }
        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;
        let healthy = layout.kustomizations.len();
        let pids = [controller.pid()];

        let before_create = self.checkpoint(&pids);
        let started = Instant::now();
        futures::stream::iter(layout.kustomizations.iter())
            .map(|(ns, name)| self.create_kustomization(ns, name, &layout.run))
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        let created = self
            .wait_until(
                &layout.run,
                healthy,
                &revision(&layout.run, 1),
                started,
                &controller,
            )
            .await;
        let seconds =
            |outcome: &Result<Duration, String>| outcome.as_ref().ok().map(Duration::as_secs_f64);
        result.push(
            "(a) create the healthy Kustomizations -> all Ready [s]",
            seconds(&created),
            2,
        );

        let before_alone = self.checkpoint(&pids);
        let alone = self.new_healthy_revision(&layout, 2, &controller).await;
        let after_alone = self.checkpoint(&pids);
        result.push(
            "(b) new revision on the healthy ones, alone -> all Ready [s]",
            alone.as_ref().ok().map(Duration::as_secs_f64),
            2,
        );

        let spec = json!({"wait": true, "timeout": FAILING_TIMEOUT});
        futures::stream::iter(failing.iter())
            .map(|(ns, name)| self.create_kustomization_with(ns, name, &failing_run, spec.clone()))
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        let waiting = self.wait_attempted(&failing_run, failing.len()).await;
        result.push_count(
            "failing Kustomizations in their health check before (c)",
            waiting as u64,
        );
        let before_beside = self.checkpoint(&pids);
        let beside = self.new_healthy_revision(&layout, 3, &controller).await;
        let after_beside = self.checkpoint(&pids);
        if beside.is_err() {
            result.push_count(
                "(c) healthy Kustomizations Ready with the new revision at the deadline",
                self.ready_count(&layout.run, &revision(&layout.run, 3)) as u64,
            );
        }
        result.push(
            "(c) new revision on the healthy ones, beside the failing -> all Ready [s]",
            beside.as_ref().ok().map(Duration::as_secs_f64),
            2,
        );
        if let (Ok(alone), Ok(beside)) = (&alone, &beside) {
            result.push(
                "(c) / (b): slowdown caused by the failing neighbours",
                Some(beside.as_secs_f64() / alone.as_secs_f64()),
                2,
            );
        }
        let phases = [
            ("(a) create", (&before_create, &before_alone), &created, 1),
            (
                "(b) new revision, alone",
                (&before_alone, &after_alone),
                &alone,
                2,
            ),
            (
                "(c) new revision, beside the failing",
                (&before_beside, &after_beside),
                &beside,
                3,
            ),
        ];
        for (phase, checkpoints, outcome, n) in phases {
            // On a timeout, per Kustomization that did apply the revision.
            let reconciled = match outcome {
                Ok(_) => healthy,
                Err(_) => self.ready_count(&layout.run, &revision(&layout.run, n)),
            };
            record_cost(
                &mut result,
                phase,
                checkpoints,
                reconciled,
                seconds(outcome),
            );
        }
        for (phase, outcome) in [("(a)", &created), ("(b)", &alone), ("(c)", &beside)] {
            if let Err(e) = outcome {
                result.note(format!("{phase}: {e}"));
            }
        }

        self.delete_kustomizations(&layout.namespaces, &failing_run)
            .await;
        self.delete_kustomizations(&layout.namespaces, &layout.run)
            .await;
        // Not measured: a controller that holds a worker for each health check may take many
        // times this to get to them all; their finalizers are dropped below.
        let deadline = Instant::now() + self.timeout().min(Duration::from_secs(120));
        while !(self.matching(&layout.run).is_empty() && self.matching(&failing_run).is_empty())
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for ks in self.matching(&failing_run) {
            self.release_finalizers(&ks).await;
        }
        for ks in self.matching(&layout.run) {
            self.release_finalizers(&ks).await;
        }
        self.clean_up(&layout, &mut controller, &mut result).await;
        result
    }

    /// Publishes revision `n` on every healthy Kustomization's GitRepository and waits until
    /// all have applied it.
    async fn new_healthy_revision(
        &self,
        layout: &Layout,
        n: u32,
        controller: &Controller,
    ) -> Result<Duration, String> {
        eprintln!("bench: publishing revision {n} on the healthy GitRepositories");
        let started = Instant::now();
        futures::stream::iter(layout.kustomizations.iter())
            .map(|(ns, name)| self.publish(layout, ns, name, n))
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        self.wait_until(
            &layout.run,
            layout.kustomizations.len(),
            &revision(&layout.run, n),
            started,
            controller,
        )
        .await
    }

    /// Waits (at most 60 s) until `count` Kustomizations labelled `run` have attempted a
    /// revision (applied it and gone on to their health check); returns how many had.
    async fn wait_attempted(&self, run: &str, count: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let attempted = self
                .matching(run)
                .iter()
                .filter(|ks| !ks.data["status"]["lastAttemptedRevision"].is_null())
                .count();
            if attempted >= count || Instant::now() >= deadline {
                return attempted;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
