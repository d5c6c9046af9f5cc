//! `--scenario memory`: the controller's resident memory at idle, before and after it holds N
//! Kustomizations of `--objects` objects (1000 x 10 ConfigMaps by default): VmRSS after the
//! warm-up and `--settle` seconds of idle (the baseline), and `--settle` seconds after all N
//! are Ready, and the difference.

use super::*;

/// The team's goal: with [`GOAL_SIZE`] Kustomizations x objects, ours stays within this many
/// MiB of its baseline.
const GOAL_MIB: f64 = 30.0;

/// The size the goal is set for: (Kustomizations, objects each).
const GOAL_SIZE: (usize, u64) = (1000, 10);

const BASELINE: &str = "(memory) RSS at idle after the warm-up: baseline [MiB]";
const LOADED: &str = "(memory) RSS at idle, N Kustomizations Ready [MiB]";
const INCREASE: &str = "(memory) RSS increase over the baseline [MiB]";

const MIB: f64 = 1024.0 * 1024.0;

/// The scenario's headline figures; the RSS increase is held to [`GOAL_MIB`] at
/// [`GOAL_SIZE`] only.
pub fn headlines(args: &Args) -> Vec<Headline> {
    let at_goal_size = (args.kustomizations(), args.objects()) == GOAL_SIZE;
    let headline = |metric: &str, goal| Headline {
        metric: metric.to_string(),
        goal,
    };
    vec![
        headline(BASELINE, Goal::None),
        headline(LOADED, Goal::None),
        headline(
            INCREASE,
            if at_goal_size {
                Goal::AtMost(GOAL_MIB)
            } else {
                Goal::None
            },
        ),
    ]
}

impl Bench<'_> {
    /// Measures one implementation once in the `memory` scenario.
    pub async fn run_memory(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout(implementation, index);
        let objects = self.args.objects();
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: idle memory with {} Kustomizations x {objects} objects in \
             {} namespaces (run id {})",
            implementation.name,
            layout.kustomizations.len(),
            layout.namespaces.len(),
            layout.run
        );
        self.prepare(&layout).await;
        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;
        let pid = controller.pid();
        let settle = Duration::from_secs(self.args.settle);
        eprintln!("bench: (memory) idle for {} s", settle.as_secs());
        tokio::time::sleep(settle).await;
        let baseline = process::memory(pid);
        let start = self.checkpoint(&[pid]);
        let applied = self.apply_phase(&layout, &[pid], &controller).await;
        let ready = process::memory(pid);
        let ready_count = self.ready_count(&layout.run, &revision(&layout.run, 1));
        if applied.seconds.is_none() {
            result.note(format!(
                "memory: {ready_count} of {} Kustomizations Ready at the {} s deadline; the \
                 RSS figures are read then",
                layout.kustomizations.len(),
                self.args.timeout
            ));
        }
        self.verify(&layout, objects, "(memory)", &mut result).await;
        eprintln!("bench: (memory) idle for {} s", settle.as_secs());
        tokio::time::sleep(settle).await;
        let loaded = process::memory(pid);
        let peak = loaded
            .map_or(0, |m| m.hwm)
            .max(controller.sampled_peak_rss());
        if baseline.is_none() || loaded.is_none() {
            result.note("memory: no /proc/<pid>/status for the controller".to_string());
        }

        result.push(
            "(memory) create N Kustomizations -> all Ready [s]",
            applied.seconds,
            2,
        );
        result.push_count(
            "(memory) Kustomizations Ready at the end of create",
            ready_count as u64,
        );
        record_cost(
            &mut result,
            "(memory) create",
            (&start, &applied.end),
            ready_count,
            applied.seconds,
        );
        let rss = |m: Option<process::Memory>| m.map(|m| m.rss as f64 / MIB);
        result.push(BASELINE, rss(baseline), 1);
        result.push("(memory) RSS when all are Ready [MiB]", rss(ready), 1);
        result.push(LOADED, rss(loaded), 1);
        let increase = rss(loaded).zip(rss(baseline)).map(|(l, b)| l - b);
        result.push(INCREASE, increase, 1);
        result.push(
            "(memory) RSS increase per Kustomization [KiB]",
            increase.map(|i| i * 1024.0 / layout.kustomizations.len().max(1) as f64),
            1,
        );
        result.push("peak RSS (VmHWM) [MiB]", Some(peak as f64 / MIB), 1);
        result.push(
            "(memory) controller CPU, create -> all Ready [s]",
            Some(applied.end.cpu - start.cpu),
            2,
        );
        let requests = controller_requests(&start, &applied.end);
        result.push_count(
            "(memory) API requests, create -> all Ready",
            requests.values().sum(),
        );
        let path = self.work_dir.join(&layout.run).join("requests.txt");
        if let Err(e) = std::fs::write(&path, format!("(a)\n{}", breakdown(&requests))) {
            eprintln!("bench: cannot write {}: {e}", path.display());
        }

        self.clean_up(&layout, &mut controller, &mut result).await;
        self.wait_until_gone(&layout, &mut result).await;
        result
    }
}
