//! `--scenario wait`: N Kustomizations with `wait: true`, each one Deployment of 2 replicas
//! that kube-controller-manager, kube-scheduler and kwok really roll out. Measures create ->
//! all Ready, and for each Kustomization the gap between its last pod turning Ready and its
//! own Ready turning True, from the times the bench's watches receive those events.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde::de::DeserializeOwned;

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
        let watches = self.watch_ready(&layout.run, &times).await;

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
        let (all_ready, mut gaps) = {
            let times = times.lock().expect("ready times");
            let all_ready = (times.kustomizations.len() == expected).then(|| {
                times
                    .kustomizations
                    .values()
                    .map(|t| t.duration_since(started).as_secs_f64())
                    .fold(0.0, f64::max)
            });
            (all_ready, ready_gaps(&times))
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
        if gaps.without_pods > 0 {
            result.note(format!(
                "wait: {} Ready Kustomization(s) with fewer than 2 Ready pods seen by the bench \
                 (left out of the gap figures)",
                gaps.without_pods
            ));
        }
        let early: Vec<f64> = gaps.seconds.iter().copied().filter(|g| *g < 0.0).collect();
        if !early.is_empty() {
            result.note(format!(
                "wait: {} Kustomization(s) turned Ready before their last pod did, by up to \
                 {:.3} s (negative gaps, kept in the figures)",
                early.len(),
                -early.iter().copied().fold(0.0, f64::min)
            ));
        }
        gaps.seconds.sort_by(f64::total_cmp);
        let gaps = gaps.seconds;
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
        self.wait_until_gone(&layout, &mut result).await;
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

    /// Watches the run's pods and Kustomizations and records when each turns Ready. Returns
    /// once both watches have their first list, so no event of the run is received late.
    async fn watch_ready(
        &self,
        run: &str,
        times: &Arc<Mutex<ReadyTimes>>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let selector = format!("{RUN_LABEL}={run}");
        let pod_times = Arc::clone(times);
        let pods = watch(
            Api::<Pod>::all(self.client.clone()),
            &selector,
            move |pod: Pod, now| {
                let ready = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
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
            },
        );
        let ks_times = Arc::clone(times);
        let kustomizations = watch(
            Api::<DynamicObject>::all_with(self.client.clone(), &kustomization_resource()),
            &selector,
            move |ks: DynamicObject, now| {
                let ready = has_ready_condition(ks.data["status"].get("conditions"));
                if let (true, Some(ns), Some(name), Ok(mut times)) = (
                    ready,
                    ks.metadata.namespace.clone(),
                    ks.metadata.name.clone(),
                    ks_times.lock(),
                ) {
                    times.kustomizations.entry((ns, name)).or_insert(now);
                }
            },
        );
        let (pods, kustomizations) = futures::join!(pods, kustomizations);
        vec![pods, kustomizations]
    }

    /// Waits until the run's namespaces are gone (kube-controller-manager deletes their pods),
    /// so that the next implementation starts on a quiet cluster.
    async fn wait_until_gone(&self, layout: &Layout, result: &mut RunResult) {
        let namespaces = Api::<Namespace>::all(self.client.clone());
        let started = Instant::now();
        let deadline = started + Duration::from_secs(600);
        let mut left = Vec::new();
        for ns in layout.namespaces.iter().chain([&layout.warmup_namespace]) {
            loop {
                match namespaces.get_opt(ns).await {
                    Ok(None) => break,
                    Ok(Some(_)) | Err(_) if Instant::now() >= deadline => {
                        left.push(ns.clone());
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        }
        let pods = Api::<Pod>::all(self.client.clone())
            .list_metadata(&ListParams::default().labels(&format!("{RUN_LABEL}={}", layout.run)))
            .await
            .map(|list| list.items.len())
            .unwrap_or(usize::MAX);
        if left.is_empty() && pods == 0 {
            eprintln!(
                "bench: [{}] namespaces and pods deleted in {:.1} s",
                result.implementation,
                started.elapsed().as_secs_f64()
            );
        } else {
            result.note(format!(
                "wait: after 600 s, namespace(s) {left:?} still there and {pods} pod(s) of the run \
                 left: the next run shares the cluster with them"
            ));
        }
    }
}

/// The gaps between each Kustomization's last pod turning Ready and its own Ready.
struct Gaps {
    /// In seconds, negative when the Kustomization turned Ready first.
    seconds: Vec<f64>,
    /// Ready Kustomizations for which fewer than 2 Ready pods were seen.
    without_pods: usize,
}

fn ready_gaps(times: &ReadyTimes) -> Gaps {
    let mut gaps = Gaps {
        seconds: Vec::new(),
        without_pods: 0,
    };
    for (key, ready) in &times.kustomizations {
        let last_pod = times
            .pods
            .get(key)
            .filter(|pods| pods.len() >= 2)
            .and_then(|pods| pods.values().max());
        match last_pod {
            Some(last_pod) if ready >= last_pod => gaps
                .seconds
                .push(ready.duration_since(*last_pod).as_secs_f64()),
            Some(last_pod) => gaps
                .seconds
                .push(-last_pod.duration_since(*ready).as_secs_f64()),
            None => gaps.without_pods += 1,
        }
    }
    gaps
}

/// Watches the objects of `api` that match `selector`, calling `on_object` with each object
/// listed, added or changed and the time its event was received, until the task is aborted.
/// Returns once the first list is in (or after 60 s).
async fn watch<K, F>(api: Api<K>, selector: &str, mut on_object: F) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnMut(K, Instant) + Send + 'static,
{
    let (listed, first_list) = tokio::sync::oneshot::channel();
    let mut listed = Some(listed);
    let mut events = watcher(api, watcher::Config::default().labels(selector))
        .default_backoff()
        .boxed();
    let task = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let now = Instant::now();
            match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    on_object(object, now)
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => eprintln!("bench: watch error: {e}"),
            }
        }
    });
    if tokio::time::timeout(Duration::from_secs(60), first_list)
        .await
        .is_err()
    {
        eprintln!("bench: a watch had no first list after 60 s; going on");
    }
    task
}

/// The one object of a Kustomization's artifact; its pods carry the run label and the
/// Kustomization's name as `app`.
fn deployment(ns: &str, name: &str, run: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n        {RUN_LABEL}: {run}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/{name}:1\n"
    )
}
