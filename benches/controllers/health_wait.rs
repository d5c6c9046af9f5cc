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

/// (namespace, Kustomization name); its Deployment has the same name, its pods that name as
/// their `app` label.
type Key = (String, String);

/// Receive times of the first event showing each object Ready (a Deployment: rolled out).
#[derive(Default)]
struct ReadyTimes {
    pods: HashMap<Key, HashMap<String, Instant>>,
    deployments: HashMap<Key, Instant>,
    kustomizations: HashMap<Key, Instant>,
}

impl ReadyTimes {
    /// When the last of each Deployment's 2 pods turned Ready (Deployments with fewer Ready
    /// pods seen are left out).
    fn last_pods(&self) -> HashMap<Key, Instant> {
        self.pods
            .iter()
            .filter(|(_, pods)| pods.len() >= 2)
            .filter_map(|(key, pods)| Some((key.clone(), *pods.values().max()?)))
            .collect()
    }
}

/// Whether a Deployment is rolled out the way kstatus calls it Current: its latest spec
/// observed, and every replica updated, Ready and available, none left over.
fn rolled_out(deployment: &Deployment) -> bool {
    let (Some(spec), Some(status)) = (&deployment.spec, &deployment.status) else {
        return false;
    };
    let replicas = spec.replicas.unwrap_or(1);
    status.observed_generation >= deployment.metadata.generation
        && status.replicas == Some(replicas)
        && status.updated_replicas == Some(replicas)
        && status.ready_replicas == Some(replicas)
        && status.available_replicas == Some(replicas)
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
        let launched = Instant::now();
        let mut controller = Controller::start(&Launch {
            binary: &implementation.binary,
            kubeconfig: &self.control_plane.kubeconfig,
            concurrent: self.args.concurrent,
            extra_args: &self.args.controller_args,
            log: run_dir.join("controller.log"),
            shards: 0,
            temp_dir: run_dir.join("tmp"),
        });
        eprintln!("bench: controller log: {}", controller.log.display());
        controller.wait_healthy(Duration::from_secs(120));
        // As in the `apply` scenario: one Kustomization (same shape, its own namespace) waited
        // for first, so that the controller's caches are synced before anything is timed.
        let warmup_run = format!("{}-warmup", layout.run);
        self.create_waiting_kustomization(&layout.warmup_namespace, "warmup", &warmup_run)
            .await;
        let warm = self
            .wait_until(
                &warmup_run,
                1,
                &revision(&layout.run, 1),
                launched,
                &controller,
            )
            .await;
        result.push(
            "(wait) startup: process start -> warm-up Kustomization Ready [s]",
            warm.as_ref().ok().map(Duration::as_secs_f64),
            2,
        );
        if let Err(e) = &warm {
            result.note(format!("warm-up: {e}"));
        }

        let start = self.checkpoint(&[controller.pid()]);
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
        let checkpoint = self.checkpoint(&[pid]);
        let end = process::memory(pid).unwrap_or_default();
        let cpu = process::cpu_seconds(pid).unwrap_or(f64::NAN);
        let (all_ready, total, cluster, controller_part) = {
            let times = times.lock().expect("ready times");
            let all_ready = (times.kustomizations.len() == expected).then(|| {
                times
                    .kustomizations
                    .values()
                    .map(|t| t.duration_since(started).as_secs_f64())
                    .fold(0.0, f64::max)
            });
            let last_pods = times.last_pods();
            (
                all_ready,
                Gaps::between(&last_pods, &times.kustomizations),
                Gaps::between(&last_pods, &times.deployments),
                Gaps::between(&times.deployments, &times.kustomizations),
            )
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
        result.push(
            "(wait) create N Kustomizations -> all Ready [s]",
            all_ready,
            2,
        );
        total.record(
            "last pod Ready -> Kustomization Ready",
            &[("median", 0.5), ("p90", 0.9), ("max", 1.0)],
            &mut result,
        );
        cluster.record(
            "of which last pod Ready -> Deployment rolled out (kube-controller-manager)",
            &[("median", 0.5)],
            &mut result,
        );
        controller_part.record(
            "of which Deployment rolled out -> Kustomization Ready (the controller)",
            &[("median", 0.5), ("p90", 0.9), ("max", 1.0)],
            &mut result,
        );
        let mib = |bytes: u64| Some(bytes as f64 / (1024.0 * 1024.0));
        result.push(
            "peak RSS (VmHWM) [MiB]",
            mib(end.hwm.max(controller.sampled_peak_rss())),
            1,
        );
        result.push("controller CPU, whole run [s]", Some(cpu), 2);
        // kube-apiserver's and etcd's CPU here also serves kube-controller-manager, the
        // scheduler and kwok rolling the Deployments out.
        record_cost(
            &mut result,
            "(wait) create",
            (&start, &checkpoint),
            times.lock().map(|t| t.kustomizations.len()).unwrap_or(0),
            all_ready,
        );

        self.clean_up(&layout, &mut controller, &mut result).await;
        self.wait_until_gone(&layout, &mut result).await;
        result
    }

    /// Namespaces, and one GitRepository per Kustomization (and one for the warm-up) whose
    /// artifact is one Deployment.
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
        let (ns, name) = (&layout.warmup_namespace, "warmup");
        self.create_git_repository(ns, name).await;
        let files = vec![(
            "deploy/deployment.yaml".to_string(),
            deployment(ns, name, &format!("{}-warmup", layout.run)),
        )];
        self.publish_files(ns, name, &revision(&layout.run, 1), &files)
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

    /// Watches the run's pods, Deployments and Kustomizations and records when each turns Ready
    /// (a Deployment: rolled out). Returns once the watches have their first list, so no event
    /// of the run is received late.
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
        let deployment_times = Arc::clone(times);
        let deployments = watch(
            Api::<Deployment>::all(self.client.clone()),
            &selector,
            move |deployment: Deployment, now| {
                if let (true, Some(ns), Some(name), Ok(mut times)) = (
                    rolled_out(&deployment),
                    deployment.metadata.namespace.clone(),
                    deployment.metadata.name.clone(),
                    deployment_times.lock(),
                ) {
                    times.deployments.entry((ns, name)).or_insert(now);
                }
            },
        );
        let (pods, deployments, kustomizations) = futures::join!(pods, deployments, kustomizations);
        vec![pods, deployments, kustomizations]
    }

    /// Waits until the run's namespaces are gone (kube-controller-manager deletes their pods),
    /// so that the next implementation starts on a quiet cluster. Without
    /// kube-controller-manager nothing finishes deleting a namespace: returns at once.
    pub(super) async fn wait_until_gone(&self, layout: &Layout, result: &mut RunResult) {
        if !self.args.with_workload_controllers() {
            return;
        }
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
                "after 600 s, namespace(s) {left:?} still there and {pods} pod(s) of the run \
                 left: the next run shares the cluster with them"
            ));
        }
    }
}

/// For each Kustomization, the time between two of its events.
struct Gaps {
    /// In seconds, sorted; negative when the second event came first.
    seconds: Vec<f64>,
    /// How many of the second events had no first one to compare with.
    missing: usize,
}

impl Gaps {
    /// `to[key] - from[key]` for every key of `to`.
    fn between(from: &HashMap<Key, Instant>, to: &HashMap<Key, Instant>) -> Gaps {
        let mut gaps = Gaps {
            seconds: Vec::new(),
            missing: 0,
        };
        for (key, end) in to {
            match from.get(key) {
                Some(start) if end >= start => {
                    gaps.seconds.push(end.duration_since(*start).as_secs_f64())
                }
                Some(start) => gaps.seconds.push(-start.duration_since(*end).as_secs_f64()),
                None => gaps.missing += 1,
            }
        }
        gaps.seconds.sort_by(f64::total_cmp);
        gaps
    }

    /// The value below which a fraction `p` of the gaps lie (1.0: the largest).
    fn percentile(&self, p: f64) -> Option<f64> {
        let n = self.seconds.len();
        (n > 0).then(|| self.seconds[((n as f64 * p) as usize).min(n - 1)])
    }

    /// One row per `(label, p)` of `percentiles`, and a note on missing or negative gaps.
    fn record(&self, what: &str, percentiles: &[(&str, f64)], result: &mut RunResult) {
        for (label, p) in percentiles {
            result.push(
                &format!("(wait) {what}, {label} [s]"),
                self.percentile(*p),
                3,
            );
        }
        if self.missing > 0 {
            result.note(format!(
                "wait: {what}: {} without the first event (fewer than 2 Ready pods or no \
                 rolled-out Deployment seen), left out",
                self.missing
            ));
        }
        let negative = self.seconds.iter().filter(|g| **g < 0.0).count();
        if negative > 0 {
            result.note(format!(
                "wait: {what}: {negative} negative (the second event first, by up to {:.3} s), \
                 kept in the figures",
                -self.seconds[0]
            ));
        }
    }
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

/// The one object of a Kustomization's artifact; it and its pods carry the run label, the pods
/// the Kustomization's name as `app`.
fn deployment(ns: &str, name: &str, run: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    {RUN_LABEL}: {run}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n        {RUN_LABEL}: {run}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/{name}:1\n"
    )
}
