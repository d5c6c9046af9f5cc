//! `--scenario big`: one Kustomization of `--objects` objects (by default one ConfigMap and
//! 1999 NetworkPolicies: kustomize-controller#1428 reports a Kustomization of ~1500
//! NetworkPolicies slowing down from 25 s to 2m30s). Four phases, each with its wall time, its
//! API requests and the CPU it cost the controller and kube-apiserver + etcd: create -> Ready,
//! a requested reconcile with nothing changed, a new revision that changes every object ->
//! Ready, delete -> finalizer released (every object pruned). Running it at two sizes
//! (`--objects 500`, `--objects 2000`) shows whether the time grows linearly.

use super::*;
use crate::artifacts::BASE_PORT;
use k8s_openapi::api::networking::v1::NetworkPolicy;

const CREATE: &str = "(big) create -> Ready [s]";
const NOOP: &str = "(big) requested reconcile, nothing changed: requestedAt -> handled [s]";
const REVISION: &str = "(big) new revision, every object changed -> Ready [s]";
const DELETE: &str = "(big) delete -> finalizer released, every object pruned [s]";

/// The scenario's headline figures: the four phases' wall times and what each cost.
pub fn headlines() -> Vec<Headline> {
    let phases = ["(create)", "(no-op)", "(new revision)", "(delete)"].map(|phase| {
        format!("cost per reconcile {phase}: controller + kube-apiserver + etcd CPU [ms]")
    });
    [CREATE, NOOP, REVISION, DELETE]
        .into_iter()
        .map(str::to_string)
        .chain(phases)
        .map(|metric| Headline {
            metric,
            goal: Goal::None,
        })
        .collect()
}

impl Bench<'_> {
    /// Measures one implementation once in the `big` scenario.
    pub async fn run_big(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout_of(implementation, index, 1, 1);
        let objects = self.args.objects();
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: one Kustomization of {objects} objects (run id {})",
            implementation.name, layout.run
        );
        self.prepare(&layout).await;
        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;
        if let Some((ns, name)) = layout.kustomizations.first() {
            self.measure_big(&layout, ns, name, &controller, &mut result)
                .await;
        }
        self.clean_up(&layout, &mut controller, &mut result).await;
        result
    }

    /// The four phases on Kustomization `ns/name`, recorded in `result`.
    async fn measure_big(
        &self,
        layout: &Layout,
        ns: &str,
        name: &str,
        controller: &Controller,
        result: &mut RunResult,
    ) {
        let objects = self.args.objects();
        let pids = [controller.pid()];

        eprintln!("bench: (big) create");
        let before = self.checkpoint(&pids);
        let started = Instant::now();
        self.create_kustomization(ns, name, &layout.run).await;
        let created = self
            .wait_until(
                &layout.run,
                1,
                &revision(&layout.run, 1),
                started,
                controller,
            )
            .await;
        let after_create = self.checkpoint(&pids);
        self.verify(layout, objects, "(create)", result).await;

        eprintln!("bench: (big) requested reconcile, nothing changed");
        let noop = self
            .requested_reconcile(layout, ns, name, "noop", controller)
            .await;

        eprintln!("bench: (big) new revision, every object changed");
        let before_revision = self.checkpoint(&pids);
        let started = Instant::now();
        let files = artifacts::manifests_every_changed(
            ns,
            name,
            &layout.run,
            objects,
            self.args.object_kinds(),
            2,
        );
        self.publish_files(ns, name, &revision(&layout.run, 2), &files)
            .await;
        let revised = self
            .wait_until(
                &layout.run,
                1,
                &revision(&layout.run, 2),
                started,
                controller,
            )
            .await;
        let after_revision = self.checkpoint(&pids);
        self.verify(layout, objects, "(new revision)", result).await;
        self.verify_changed(layout, result).await;
        self.verify_port(ns, &format!("{name}-{}", objects - 1), result)
            .await;

        eprintln!("bench: (big) delete");
        let before_delete = self.checkpoint(&pids);
        let started = Instant::now();
        self.delete_kustomizations(&layout.namespaces, &layout.run)
            .await;
        let deadline = started + self.timeout();
        while !self.matching(&layout.run).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let deleted = self
            .matching(&layout.run)
            .is_empty()
            .then(|| started.elapsed());
        let after_delete = self.checkpoint(&pids);
        self.verify(layout, 0, "(delete)", result).await;

        let seconds = |outcome: &Result<Duration, String>| match outcome {
            Ok(elapsed) => Some(elapsed.as_secs_f64()),
            Err(e) => {
                eprintln!("bench: (big) timed out: {e}");
                None
            }
        };
        let created = seconds(&created);
        let revised = seconds(&revised);
        let deleted = deleted.map(|d| d.as_secs_f64());
        for (metric, value) in [
            (CREATE, created),
            (NOOP, noop.seconds),
            (REVISION, revised),
            (DELETE, deleted),
        ] {
            result.push(metric, value, 2);
        }
        let per_second = |seconds: Option<f64>| seconds.map(|s| objects as f64 / s);
        result.push("(big) objects per second, create", per_second(created), 0);
        result.push(
            "(big) objects per second, new revision",
            per_second(revised),
            0,
        );
        result.push("(big) objects per second, delete", per_second(deleted), 0);

        record_cost(result, "(create)", (&before, &after_create), 1, created);
        result.push(
            "cost per reconcile (no-op): controller + kube-apiserver + etcd CPU [ms]",
            Some(noop.cost_ms(0.0)),
            1,
        );
        result.push(
            "cost per reconcile (no-op): of which the controller's CPU [ms]",
            Some(noop.cpu * 1000.0),
            1,
        );
        let revision_checkpoints = (&before_revision, &after_revision);
        record_cost(result, "(new revision)", revision_checkpoints, 1, revised);
        let delete_checkpoints = (&before_delete, &after_delete);
        record_cost(result, "(delete)", delete_checkpoints, 1, deleted);

        let phases = [
            ("(create)", controller_requests(&before, &after_create)),
            ("(no-op)", noop.requests.clone()),
            (
                "(new revision)",
                controller_requests(&before_revision, &after_revision),
            ),
            (
                "(delete)",
                controller_requests(&before_delete, &after_delete),
            ),
        ];
        for (phase, requests) in &phases {
            result.push_count(
                &format!("(big) API requests {phase}"),
                requests.values().sum(),
            );
        }
        result.push(
            "peak RSS (VmHWM) [MiB]",
            process::memory_of(&pids)
                .map(|m| m.hwm.max(controller.sampled_peak_rss()) as f64 / (1024.0 * 1024.0)),
            1,
        );
        let text = phases
            .iter()
            .map(|(phase, requests)| format!("{phase}\n{}", breakdown(requests)))
            .collect::<Vec<_>>()
            .join("\n");
        let path = self.work_dir.join(&layout.run).join("requests.txt");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("bench: cannot write {}: {e}", path.display());
        }
    }

    /// Checks that revision 2 reached NetworkPolicy `ns/name` (when there is one by that
    /// name): its port is the new one.
    async fn verify_port(&self, ns: &str, name: &str, result: &mut RunResult) {
        if self.args.object_kinds() != crate::args::ObjectKinds::NetworkPolicies {
            return;
        }
        self.own("GET", "networkpolicies", 1);
        let policy = Api::<NetworkPolicy>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("get NetworkPolicy {ns}/{name}: {e}"));
        let port = policy
            .and_then(|p| p.spec)
            .and_then(|s| s.ingress)
            .and_then(|i| i.into_iter().next())
            .and_then(|rule| rule.ports)
            .and_then(|p| p.into_iter().next())
            .and_then(|p| p.port);
        let expected = BASE_PORT + 1;
        let matches = matches!(
            &port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p))
                if u32::try_from(*p).ok() == Some(expected)
        );
        if !matches {
            result.note(format!(
                "after (new revision): NetworkPolicy {ns}/{name} has port {port:?}, expected \
                 {expected}"
            ));
        }
    }
}
