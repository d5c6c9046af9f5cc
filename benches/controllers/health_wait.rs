//! `--scenario wait`: N Kustomizations with `wait: true`, each one Deployment of 2 replicas
//! that kube-controller-manager, kube-scheduler and kwok really roll out. Measures create ->
//! all Ready, and for each Kustomization the gap between its last pod turning Ready and its
//! own Ready turning True, from the times the bench's watches receive those events.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};

use super::*;

/// Receive times of Ready transitions, keyed by (namespace, Kustomization name); a pod belongs
/// to the Kustomization named by its `app` label.
#[derive(Default)]
struct ReadyTimes {
    pods: HashMap<(String, String), HashMap<String, Instant>>,
    kustomizations: HashMap<(String, String), Instant>,
}

fn has_ready_condition(conditions: Option<&Value>) -> bool {
    conditions
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

impl Bench<'_> {
    /// Measures one implementation once in the `wait` scenario.
    pub async fn run_wait(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout(implementation, index);
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: {} Kustomizations with wait: true, a Deployment of 2 replicas each, in {} namespaces (run id {})",
            implementation.name,
            layout.kustomizations.len(),
            layout.namespaces.len(),
            layout.run
        );
        self.prepare_wait(&layout).await;
        let times = Arc::new(Mutex::new(ReadyTimes::default()));
        let watches = self.watch_ready(&layout.run, &times);

        let run_dir = self.work_dir.join(&layout.run);
        let mut controller = Controller::start(&Launch {
            binary: &implementation.binary,
            kubeconfig: &self.control_plane.kubeconfig,
            concurrent: self.args.concurrent,
            extra_args: &self.args.controller_args,
            log: run_dir.join("controller.log"),
            temp_dir: run_dir.join("tmp"),
        });
        eprintln!("bench: controller log: {}", controller.log.display());
        controller.wait_healthy(Duration::from_secs(120));

        let started = Instant::now();
        futures::stream::iter(layout.kustomizations.iter())
            .map(|(ns, name)| self.create_waiting_kustomization(ns, name, &layout.run))
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        let expected = layout.kustomizations.len();
        let deadline = started + self.timeout();
        let ready_count = || times.lock().map(|t| t.kustomizations.len()).unwrap_or(0);
        while ready_count() < expected && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = controller.pid();
        let end = process::memory(pid).unwrap_or_default();
        let cpu = process::cpu_seconds(pid).unwrap_or(f64::NAN);
        let (all_ready, gaps) = {
            let times = times.lock().expect("ready times");
            let all_ready = (times.kustomizations.len() == expected).then(|| {
                times
                    .kustomizations
                    .values()
                    .map(|t| t.duration_since(started).as_secs_f64())
                    .fold(0.0, f64::max)
            });
            let mut gaps: Vec<f64> = times
                .kustomizations
                .iter()
                .filter_map(|(key, ready)| {
                    let pods = times.pods.get(key).filter(|pods| pods.len() >= 2)?;
                    let last_pod = pods.values().max()?;
                    Some(ready.saturating_duration_since(*last_pod).as_secs_f64())
                })
                .collect();
            gaps.sort_by(f64::total_cmp);
            (all_ready, gaps)
        };
        for task in watches {
            task.abort();
        }
        if all_ready.is_none() {
            result.note(format!(
                "wait: {} of {expected} Kustomizations Ready after {} s\n{}",
                ready_count(),
                self.args.timeout,
                controller.log_tail(20)
            ));
        }
        let percentile = |p: f64| {
            (!gaps.is_empty()).then(|| gaps[((gaps.len() as f64 * p) as usize).min(gaps.len() - 1)])
        };
        result.push(
            "(wait) create N Kustomizations -> all Ready [s]",
            all_ready,
            2,
        );
        result.push(
            "(wait) last pod Ready -> Kustomization Ready, median [s]",
            percentile(0.5),
            3,
        );
        result.push(
            "(wait) last pod Ready -> Kustomization Ready, p90 [s]",
            percentile(0.9),
            3,
        );
        result.push(
            "(wait) last pod Ready -> Kustomization Ready, max [s]",
            gaps.last().copied(),
            3,
        );
        let mib = |bytes: u64| Some(bytes as f64 / (1024.0 * 1024.0));
        result.push(
            "peak RSS (VmHWM) [MiB]",
            mib(end.hwm.max(controller.sampled_peak_rss())),
            1,
        );
        result.push("controller CPU, whole run [s]", Some(cpu), 2);

        self.clean_up(&layout, &mut controller, &mut result).await;
        self.wait_until_gone(&layout).await;
        result
    }

    /// Namespaces, and one GitRepository per Kustomization whose artifact is one Deployment.
    async fn prepare_wait(&self, layout: &Layout) {
        let namespaces = Api::<Namespace>::all(self.client.clone());
        for name in layout.namespaces.iter().chain([&layout.warmup_namespace]) {
            self.own("POST", "namespaces", 1);
            let ns: Namespace = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {RUN_LABEL: layout.run}},
            }))
            .expect("namespace manifest");
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        }
        futures::stream::iter(layout.kustomizations.iter())
            .map(|(ns, name)| async move {
                self.create_git_repository(ns, name).await;
                let files = vec![(
                    "deploy/deployment.yaml".to_string(),
                    deployment(ns, name, &layout.run),
                )];
                self.publish_files(ns, name, &revision(&layout.run, 1), &files)
                    .await;
            })
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
    }

    async fn create_waiting_kustomization(&self, ns: &str, name: &str, run: &str) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
        let ks: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": ns, "labels": {RUN_LABEL: run}},
            "spec": {
                "interval": "60m",
                "retryInterval": "10s",
                "timeout": "30m",
                "prune": true,
                "wait": true,
                "path": "./deploy",
                "sourceRef": {"kind": "GitRepository", "name": name},
            },
        }))
        .expect("Kustomization manifest");
        self.own("POST", "kustomizations", 1);
        api.create(&PostParams::default(), &ks)
            .await
            .unwrap_or_else(|e| panic!("create Kustomization {ns}/{name}: {e}"));
    }

    /// Watches the run's pods and Kustomizations and records when each turns Ready.
    fn watch_ready(
        &self,
        run: &str,
        times: &Arc<Mutex<ReadyTimes>>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let selector = format!("{RUN_LABEL}={run}");
        let pods: Api<Pod> = Api::all(self.client.clone());
        let pod_times = Arc::clone(times);
        let pod_task = tokio::spawn(
            watcher(pods, watcher::Config::default().labels(&selector))
                .default_backoff()
                .applied_objects()
                .for_each(move |pod| {
                    let now = Instant::now();
                    if let Ok(pod) = pod {
                        let ready = pod
                            .status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            });
                        let app = pod.metadata.labels.as_ref().and_then(|l| l.get("app"));
                        if let (true, Some(app), Some(ns), Some(name), Ok(mut times)) = (
                            ready,
                            app,
                            pod.metadata.namespace.clone(),
                            pod.metadata.name.clone(),
                            pod_times.lock(),
                        ) {
                            times
                                .pods
                                .entry((ns, app.clone()))
                                .or_default()
                                .entry(name)
                                .or_insert(now);
                        }
                    }
                    std::future::ready(())
                }),
        );
        let kustomizations: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &kustomization_resource());
        let ks_times = Arc::clone(times);
        let ks_task = tokio::spawn(
            watcher(kustomizations, watcher::Config::default().labels(&selector))
                .default_backoff()
                .applied_objects()
                .for_each(move |ks| {
                    let now = Instant::now();
                    if let Ok(ks) = ks {
                        let ready = has_ready_condition(ks.data["status"].get("conditions"));
                        if let (true, Some(ns), Some(name), Ok(mut times)) = (
                            ready,
                            ks.metadata.namespace.clone(),
                            ks.metadata.name.clone(),
                            ks_times.lock(),
                        ) {
                            times.kustomizations.entry((ns, name)).or_insert(now);
                        }
                    }
                    std::future::ready(())
                }),
        );
        vec![pod_task, ks_task]
    }

    /// Waits until the run's namespaces are gone (kube-controller-manager deletes their pods),
    /// so that the next implementation starts on a quiet cluster.
    async fn wait_until_gone(&self, layout: &Layout) {
        let namespaces = Api::<Namespace>::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(600);
        for ns in layout.namespaces.iter().chain([&layout.warmup_namespace]) {
            while matches!(namespaces.get_opt(ns).await, Ok(Some(_))) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// The one object of a Kustomization's artifact; its pods carry the run label and the
/// Kustomization's name as `app`.
fn deployment(ns: &str, name: &str, run: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n        {RUN_LABEL}: {run}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/{name}:1\n"
    )
}
