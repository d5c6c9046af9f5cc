//! `--scenario chain`: N Kustomizations created at once, each depending on the one before it
//! (`ks-1` on `ks-0`, `ks-2` on `ks-1`, ...). Measures create -> each level Ready, and so how
//! long a dependent waits once its dependency is Ready: Flux re-checks a dependency every
//! `--requeue-dependency` (30 s by default), ours is woken by the watch on Kustomizations.

use std::collections::HashMap;

use super::*;

impl Bench<'_> {
    /// Measures one implementation once in the `chain` scenario.
    pub async fn run_chain(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout(implementation, index);
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: a dependency chain of {} Kustomizations x {} objects (run id {})",
            implementation.name,
            layout.kustomizations.len(),
            self.args.objects(),
            layout.run
        );
        self.prepare(&layout).await;

        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;

        let pid = controller.pid();
        let start = self.checkpoint(&[pid]);
        let started = Instant::now();
        futures::stream::iter(layout.kustomizations.iter().enumerate())
            .map(|(level, (ns, name))| {
                let depends_on = match level.checked_sub(1) {
                    Some(previous) => {
                        let (dep_ns, dep_name) = &layout.kustomizations[previous];
                        json!({"dependsOn": [{"name": dep_name, "namespace": dep_ns}]})
                    }
                    None => json!({}),
                };
                self.create_kustomization_with(ns, name, &layout.run, depends_on)
            })
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        let levels = self
            .wait_for_levels(&layout, &revision(&layout.run, 1), started)
            .await;
        let end = self.checkpoint(&[pid]);
        let cpu = process::cpu_seconds(pid).unwrap_or(f64::NAN);

        let all_ready = levels.iter().copied().collect::<Option<Vec<f64>>>();
        if all_ready.is_none() {
            let ready = levels.iter().filter(|l| l.is_some()).count();
            result.note(format!(
                "chain: {ready} of {} levels Ready after {} s; controller log tail:\n{}",
                levels.len(),
                self.args.timeout,
                controller.log_tail(20)
            ));
        }
        result.push(
            "(chain) create the chain -> last level Ready [s]",
            all_ready.as_ref().and_then(|l| l.last().copied()),
            2,
        );
        let steps = all_ready.map(|levels| {
            levels
                .windows(2)
                .map(|pair| pair[1] - pair[0])
                .collect::<Vec<f64>>()
        });
        result.push(
            "(chain) longest step: level k Ready -> level k+1 Ready [s]",
            steps
                .as_ref()
                .and_then(|s| s.iter().copied().reduce(f64::max)),
            2,
        );
        for (level, seconds) in levels.iter().enumerate() {
            result.push(
                &format!("(chain) create -> level {level} Ready [s]"),
                *seconds,
                2,
            );
        }
        self.verify(&layout, self.args.objects(), "(chain)", &mut result)
            .await;
        result.push("controller CPU, whole process lifetime [s]", Some(cpu), 2);
        record_cost(
            &mut result,
            "(chain) create",
            (&start, &end),
            levels.iter().filter(|l| l.is_some()).count(),
            levels.last().copied().flatten(),
        );

        self.delete_kustomizations(&layout.namespaces, &layout.run)
            .await;
        let deadline = Instant::now() + self.timeout();
        while !self.matching(&layout.run).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.clean_up(&layout, &mut controller, &mut result).await;
        result
    }

    /// Polls the watched Kustomizations until every level has applied `revision`; returns the
    /// seconds from `started` at which each level (in chain order) was first seen Ready, `None`
    /// for the levels not Ready before the timeout.
    async fn wait_for_levels(
        &self,
        layout: &Layout,
        revision: &str,
        started: Instant,
    ) -> Vec<Option<f64>> {
        let expected = format!("Applied revision: {revision}");
        let position: HashMap<(String, String), usize> = layout
            .kustomizations
            .iter()
            .cloned()
            .enumerate()
            .map(|(level, key)| (key, level))
            .collect();
        let mut levels = vec![None; layout.kustomizations.len()];
        let deadline = started + self.timeout();
        while levels.iter().any(Option::is_none) && Instant::now() < deadline {
            for ks in self.matching(&layout.run) {
                let key = (
                    ks.metadata.namespace.clone().unwrap_or_default(),
                    ks.metadata.name.clone().unwrap_or_default(),
                );
                let applied = ready(&ks).is_some_and(|(s, _, m)| s == "True" && m == expected);
                if let (true, Some(&level)) = (applied, position.get(&key)) {
                    levels[level].get_or_insert(started.elapsed().as_secs_f64());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        levels
    }
}
