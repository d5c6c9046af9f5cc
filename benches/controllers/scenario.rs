//! One measured run of one implementation: apply N Kustomizations, roll out a new revision,
//! delete them, on a clean slate of fresh namespaces.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::reflector::Store;
use serde_json::{Value, json};

use crate::args::{Args, Scenario};
use crate::artifacts::{self, ArtifactServer};
use crate::cluster::{self, ControlPlane, RequestKey};
use crate::process::{self, Controller, Launch};
use crate::report::{Goal, Headline, RunResult};

#[path = "big_kustomization.rs"]
mod big_kustomization;
#[path = "dependency_chain.rs"]
mod dependency_chain;
#[path = "failing_neighbours.rs"]
mod failing_neighbours;
#[path = "health_wait.rs"]
mod health_wait;
#[path = "idle_memory.rs"]
mod idle_memory;
#[path = "noop_reconcile.rs"]
mod noop_reconcile;

/// Label on every object the bench creates or has applied; its value is the run id.
pub const RUN_LABEL: &str = "kc-bench/run";

/// How many API requests the bench itself has in flight when creating objects.
const PARALLEL_REQUESTS: usize = 16;

/// The verbs always reported (others are added when seen), in order. `APPLY` is a server-side
/// apply (a PATCH with an apply-patch body), as kube-apiserver counts it.
const VERBS: [&str; 7] = ["GET", "LIST", "POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// An implementation to measure.
pub struct Implementation {
    /// "ours" or "Flux".
    pub name: &'static str,
    pub binary: PathBuf,
}

/// Everything the runs share.
pub struct Bench<'a> {
    pub control_plane: &'a ControlPlane,
    pub client: kube::Client,
    pub server: &'a ArtifactServer,
    /// Every Kustomization carrying [`RUN_LABEL`], kept up to date by a watch.
    pub kustomizations: Store<DynamicObject>,
    pub args: &'a Args,
    pub work_dir: PathBuf,
    /// API requests the bench itself made, per verb, so they can be told from the controller's.
    own_requests: Mutex<BTreeMap<RequestKey, u64>>,
}

/// The fresh names one run works in.
struct Layout {
    run: String,
    namespaces: Vec<String>,
    warmup_namespace: String,
    /// (namespace, Kustomization name); each has a GitRepository of the same name.
    kustomizations: Vec<(String, String)>,
}

/// Where the counters stood at a phase boundary.
struct Checkpoint {
    /// When it was taken.
    at: Instant,
    cpu: f64,
    /// Artifacts the bench's server has served.
    downloads: u64,
    /// kube-apiserver's and etcd's CPU seconds when the checkpoint was taken: the end of the
    /// phase before it.
    control_plane_cpu: f64,
    /// The same once the checkpoint's own `/metrics` scrape was served: the start of the phase
    /// after it (the scrape is the bench's work, not the controller's).
    control_plane_cpu_after_scrape: f64,
    requests: BTreeMap<RequestKey, u64>,
    own: BTreeMap<RequestKey, u64>,
}

impl Checkpoint {
    /// kube-apiserver's and etcd's CPU seconds from this checkpoint to `later`, without the
    /// bench's scrape at this one.
    fn control_plane_cpu_until(&self, later: &Checkpoint) -> f64 {
        later.control_plane_cpu - self.control_plane_cpu_after_scrape
    }
}

/// The result of one phase: wall time (None on timeout) and the counters at its end.
struct Phase {
    seconds: Option<f64>,
    end: Checkpoint,
    /// For a create or a new revision that timed out: how many Kustomizations had reconciled
    /// it by the deadline (what its cost per reconcile is divided by).
    finished_by_deadline: Option<usize>,
}

/// What a controller left after `--idle` seconds with nothing to change: the soak's figures.
struct Idle {
    /// RSS at its end.
    memory: process::Memory,
    /// Open file descriptors at its start and end.
    open_fds: (Option<usize>, Option<usize>),
    /// Reconciles finished in it (the sum of every Kustomization's history counts).
    reconciles: i64,
    /// Lines logged at level error in it.
    errors: usize,
    /// Kustomizations not Ready at the last revision at its end.
    not_ready: usize,
}

/// Everything [`Bench::measure`] collected.
struct Measured {
    start: Checkpoint,
    applied: Phase,
    updated: Phase,
    /// `--idle` seconds with nothing to do after (b), when asked for, and what it left.
    idle: Option<(Phase, Idle)>,
    deleted: Phase,
    /// RSS after the warm-up, after (a), after (b).
    memory: [process::Memory; 3],
    /// VmHWM at the end (or the sampler's maximum, if higher), in bytes.
    peak_rss: u64,
    /// CPU seconds over the controller's whole life until the end of (delete).
    total_cpu: f64,
}

impl Measured {
    /// (name, start, end) of each phase that ran.
    fn phases(&self) -> Vec<(&'static str, &Checkpoint, &Checkpoint)> {
        let mut phases = vec![
            ("(a)", &self.start, &self.applied.end),
            ("(b)", &self.applied.end, &self.updated.end),
        ];
        let before_delete = match &self.idle {
            Some((idle, _)) => {
                phases.push(("(idle)", &self.updated.end, &idle.end));
                &idle.end
            }
            None => &self.updated.end,
        };
        phases.push(("(delete)", before_delete, &self.deleted.end));
        phases
    }
}

/// Records what one phase cost per reconcile: the controller's CPU plus kube-apiserver's and
/// etcd's, divided by the `reconciles` the phase finished (one per Kustomization for create
/// and a new revision), in milliseconds; and how many cores that kept busy over its wall time.
fn record_cost(
    result: &mut RunResult,
    phase: &str,
    (from, to): (&Checkpoint, &Checkpoint),
    reconciles: usize,
    wall: Option<f64>,
) {
    let controller = to.cpu - from.cpu;
    let control_plane = from.control_plane_cpu_until(to);
    let per =
        |cpu: f64| (reconciles > 0 && cpu.is_finite()).then(|| cpu * 1000.0 / reconciles as f64);
    result.push(
        &format!("cost per reconcile {phase}: controller + kube-apiserver + etcd CPU [ms]"),
        per(controller + control_plane),
        1,
    );
    result.push(
        &format!("cost per reconcile {phase}: of which the controller's CPU [ms]"),
        per(controller),
        1,
    );
    let busy = wall
        .filter(|w| *w > 0.0)
        .map(|w| (controller + control_plane) / w)
        .filter(|b| b.is_finite());
    result.push(
        &format!("cores busy {phase}: (controller + kube-apiserver + etcd CPU) / wall time"),
        busy,
        2,
    );
}

/// Adds the measured values to `result`, in table order; `kustomizations` is how many each
/// phase reconciled.
fn record(m: &Measured, kustomizations: usize, result: &mut RunResult) {
    let times = [
        ("(a) create N Kustomizations -> all Ready [s]", &m.applied),
        (
            "(b) new revision on every source -> all Ready [s]",
            &m.updated,
        ),
        (
            "(delete) delete all -> all finalizers released [s]",
            &m.deleted,
        ),
    ];
    for (name, phase) in times {
        result.push(name, phase.seconds, 2);
    }
    let mib = |bytes: u64| Some(bytes as f64 / (1024.0 * 1024.0));
    result.push("peak RSS (VmHWM) [MiB]", mib(m.peak_rss), 1);
    let [after_warm_up, after_apply, after_update] = m.memory;
    result.push("RSS after warm-up [MiB]", mib(after_warm_up.rss), 1);
    result.push("RSS after (a) [MiB]", mib(after_apply.rss), 1);
    result.push("RSS after (b) [MiB]", mib(after_update.rss), 1);
    if let Some((_, idle)) = &m.idle {
        result.push("RSS after (idle) [MiB]", mib(idle.memory.rss), 1);
        let fds = |n: Option<usize>| n.map(|n| n as f64);
        result.push(
            "open file descriptors, start of (idle)",
            fds(idle.open_fds.0),
            0,
        );
        result.push(
            "open file descriptors, end of (idle)",
            fds(idle.open_fds.1),
            0,
        );
        result.push_count(
            "reconciles finished in (idle)",
            idle.reconciles.max(0) as u64,
        );
        result.push_count("lines logged at level error in (idle)", idle.errors as u64);
        result.push_count(
            "Kustomizations not Ready at the end of (idle)",
            idle.not_ready as u64,
        );
    }
    for (name, from, to) in m.phases() {
        result.push(
            &format!("controller CPU {name} [s]"),
            Some(to.cpu - from.cpu),
            2,
        );
    }
    result.push(
        "controller CPU, whole process lifetime [s]",
        Some(m.total_cpu),
        2,
    );
    for (name, from, to) in m.phases() {
        result.push(
            &format!("kube-apiserver + etcd CPU {name} [s]"),
            Some(from.control_plane_cpu_until(to)),
            2,
        );
    }
    let control_plane_cpu = m.start.control_plane_cpu_until(&m.deleted.end);
    result.push(
        "kube-apiserver + etcd CPU, all phases [s]",
        Some(control_plane_cpu),
        2,
    );
    record_cost(
        result,
        "(a) create",
        (&m.start, &m.applied.end),
        m.applied.finished_by_deadline.unwrap_or(kustomizations),
        m.applied.seconds,
    );
    record_cost(
        result,
        "(b) new revision",
        (&m.applied.end, &m.updated.end),
        m.updated.finished_by_deadline.unwrap_or(kustomizations),
        m.updated.seconds,
    );
    for (name, phase) in [("(a)", &m.applied), ("(b)", &m.updated)] {
        if let Some(finished) = phase.finished_by_deadline {
            result.note(format!(
                "{name} timed out with {finished} of {kustomizations} Kustomizations Ready at \
                 its revision: its cost per reconcile is divided by {finished}"
            ));
        }
    }
    if let Some((phase, idle)) = &m.idle {
        record_cost(
            result,
            "(idle) periodic no-op",
            (&m.updated.end, &phase.end),
            usize::try_from(idle.reconciles.max(0)).unwrap_or(0),
            phase.seconds,
        );
    }
    for (name, from, to) in m.phases() {
        result.push_count(
            &format!("artifact downloads {name}"),
            to.downloads.saturating_sub(from.downloads),
        );
    }
    for (name, from, to) in m.phases() {
        let total = controller_requests(from, to).values().sum();
        result.push_count(&format!("API requests {name}"), total);
    }
    let verbs = per_verb(&controller_requests(&m.start, &m.deleted.end));
    let seen = verbs.keys().map(String::as_str).filter(|v| *v != "WATCH");
    let mut listed: Vec<&str> = VERBS.to_vec();
    listed.extend(seen.filter(|v| !VERBS.contains(v)));
    for verb in listed {
        let count = verbs.get(verb).copied().unwrap_or(0);
        result.push_count(&format!("API requests, all phases: {verb}"), count);
    }
}

/// Writes the controller's requests per phase and (verb, resource) to `path`.
fn write_breakdown(m: &Measured, path: &std::path::Path) {
    let text = m
        .phases()
        .iter()
        .map(|(name, from, to)| format!("{name}\n{}", breakdown(&controller_requests(from, to))))
        .collect::<Vec<_>>()
        .join("\n");
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("bench: cannot write {}: {e}", path.display());
    }
}

/// The headline figures of the scenario and the goals they are held to (none for most).
pub fn headlines(args: &Args) -> Vec<Headline> {
    match args.scenario {
        Scenario::Noop => noop_reconcile::headlines(),
        Scenario::Memory => idle_memory::headlines(args),
        Scenario::Apply
        | Scenario::Wait
        | Scenario::Chain
        | Scenario::Fanout
        | Scenario::FailingNeighbours => Vec::new(),
        Scenario::Big => big_kustomization::headlines(),
    }
}

pub fn kustomization_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    )
}

fn git_repository_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
    )
}

/// The GitRepository every Kustomization reads in the `fanout` scenario.
const MONOREPO: &str = "monorepo";

/// `main@sha1:<40 hex>` for revision `n` of a run.
fn revision(run: &str, n: u32) -> String {
    let seed: String = run
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(32)
        .collect();
    format!("main@sha1:{seed:0>32}{n:08x}")
}

impl<'a> Bench<'a> {
    pub fn new(
        control_plane: &'a ControlPlane,
        client: kube::Client,
        server: &'a ArtifactServer,
        kustomizations: Store<DynamicObject>,
        args: &'a Args,
        work_dir: PathBuf,
    ) -> Self {
        Bench {
            control_plane,
            client,
            server,
            kustomizations,
            args,
            work_dir,
            own_requests: Mutex::default(),
        }
    }

    /// Records `n` API requests of the bench's own, keyed the way kube-apiserver counts them.
    fn own(&self, verb: &str, resource: &str, n: u64) {
        *self
            .own_requests
            .lock()
            .expect("own request counter lock")
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += n;
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.args.timeout)
    }

    /// Measures one implementation once.
    pub async fn run(&self, implementation: &Implementation, index: u64) -> RunResult {
        let layout = self.layout(implementation, index);
        let mut result = RunResult::new(implementation.name);
        eprintln!(
            "bench: [{}] run {index}: {} Kustomizations x {} objects in {} namespaces (run id {})",
            implementation.name,
            layout.kustomizations.len(),
            self.args.objects(),
            layout.namespaces.len(),
            layout.run
        );
        self.prepare(&layout).await;

        let mut controller = self
            .start_and_warm_up(implementation, &layout, &mut result)
            .await;
        let run_dir = self.work_dir.join(&layout.run);
        let measured = self.measure(&layout, &controller, &mut result).await;
        record(&measured, layout.kustomizations.len(), &mut result);
        write_breakdown(&measured, &run_dir.join("requests.txt"));

        self.clean_up(&layout, &mut controller, &mut result).await;
        result
    }

    /// Starts the controller, waits until it is healthy and has reconciled the warm-up
    /// Kustomization, and records the startup time in `result`.
    async fn start_and_warm_up(
        &self,
        implementation: &Implementation,
        layout: &Layout,
        result: &mut RunResult,
    ) -> Controller {
        let run_dir = self.work_dir.join(&layout.run);
        let mut controller = Controller::start(&Launch {
            binary: &implementation.binary,
            kubeconfig: &self.control_plane.kubeconfig,
            concurrent: self.args.concurrent,
            extra_args: &self.args.controller_args,
            log: run_dir.join("controller.log"),
            temp_dir: run_dir.join("tmp"),
            shards: self.args.shards,
        });
        let started = Instant::now();
        eprintln!("bench: controller log: {}", controller.log.display());
        controller.wait_healthy(Duration::from_secs(120));
        let warm = self.warm_up(layout, started, &controller).await;
        result.push(
            "startup: process start -> first Kustomization Ready [s]",
            warm.as_ref().ok().map(Duration::as_secs_f64),
            2,
        );
        if let Err(e) = &warm {
            result.note(format!("warm-up: {e}"));
        }
        controller
    }

    /// The three timed phases, with the verification of what each left in the cluster.
    async fn measure(
        &self,
        layout: &Layout,
        controller: &Controller,
        result: &mut RunResult,
    ) -> Measured {
        let pids = controller.pids();
        let pids = pids.as_slice();
        let after_warm_up = process::memory_of(pids).unwrap_or_default();
        let start = self.checkpoint(pids);
        let applied = self.apply_phase(layout, pids, controller).await;
        let after_apply = process::memory_of(pids).unwrap_or_default();
        self.verify(layout, self.args.objects(), "(a)", result)
            .await;
        let updated = self.update_phase(layout, pids, controller).await;
        let after_update = process::memory_of(pids).unwrap_or_default();
        self.verify(layout, self.args.objects() - 1, "(b)", result)
            .await;
        self.verify_changed(layout, result).await;
        let idle = if self.args.idle > 0 {
            Some(self.idle_phase(layout, controller).await)
        } else {
            None
        };
        let deleted = self.delete_phase(layout, pids, controller).await;
        self.verify(layout, 0, "(delete)", result).await;
        let end = process::memory_of(pids).unwrap_or_default();
        Measured {
            start,
            applied,
            updated,
            idle,
            deleted,
            memory: [after_warm_up, after_apply, after_update],
            peak_rss: end.hwm.max(controller.sampled_peak_rss()),
            total_cpu: process::cpu_seconds_of(pids).unwrap_or(f64::NAN),
        }
    }

    /// Fresh names for a run: `--kustomizations` Kustomizations in `--namespaces` namespaces.
    fn layout(&self, implementation: &Implementation, index: u64) -> Layout {
        self.layout_of(
            implementation,
            index,
            self.args.namespaces,
            self.args.kustomizations(),
        )
    }

    /// Fresh names for a run of `kustomizations` Kustomizations in `namespaces` namespaces.
    fn layout_of(
        &self,
        implementation: &Implementation,
        index: u64,
        namespaces: u64,
        kustomizations: usize,
    ) -> Layout {
        let suffix = format!("{:04x}", rand::random::<u16>());
        let run = format!(
            "{}-{index}-{suffix}",
            implementation.name.to_ascii_lowercase()
        );
        let namespaces: Vec<String> = (0..namespaces).map(|i| format!("kcb-{run}-{i}")).collect();
        let kustomizations = (0..kustomizations)
            .map(|i| {
                let ns = namespaces[i % namespaces.len()].clone();
                (ns, format!("ks-{i}"))
            })
            .collect();
        Layout {
            warmup_namespace: format!("kcb-{run}-warmup"),
            run,
            namespaces,
            kustomizations,
        }
    }

    /// Namespaces and GitRepositories with revision 1 published; no Kustomization yet.
    async fn prepare(&self, layout: &Layout) {
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
        if self.args.scenario == Scenario::Fanout {
            self.create_git_repository(&layout.namespaces[0], MONOREPO)
                .await;
            self.publish_monorepo(layout, 1).await;
        } else {
            futures::stream::iter(layout.kustomizations.iter())
                .map(|(ns, name)| async move {
                    self.create_git_repository(ns, name).await;
                    self.publish(layout, ns, name, 1).await;
                })
                .buffer_unordered(PARALLEL_REQUESTS)
                .collect::<Vec<()>>()
                .await;
        }
        self.create_git_repository(&layout.warmup_namespace, "warmup")
            .await;
        let files = artifacts::manifests(
            &layout.warmup_namespace,
            "warmup",
            &format!("{}-warmup", layout.run),
            2,
            self.args.object_kinds(),
            1,
        );
        self.publish_files(
            &layout.warmup_namespace,
            "warmup",
            &revision(&layout.run, 1),
            &files,
        )
        .await;
    }

    async fn create_git_repository(&self, ns: &str, name: &str) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &git_repository_resource());
        let repo: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"url": "https://example.invalid/bench.git", "interval": "60m"},
        }))
        .expect("GitRepository manifest");
        self.own("POST", "gitrepositories", 1);
        api.create(&PostParams::default(), &repo)
            .await
            .unwrap_or_else(|e| panic!("create GitRepository {ns}/{name}: {e}"));
    }

    /// Serves revision `n` of a Kustomization's artifact and publishes it on its GitRepository.
    async fn publish(&self, layout: &Layout, ns: &str, name: &str, n: u32) {
        let files = artifacts::manifests(
            ns,
            name,
            &layout.run,
            self.args.objects(),
            self.args.object_kinds(),
            n,
        );
        self.publish_files(ns, name, &revision(&layout.run, n), &files)
            .await;
    }

    /// `fanout`: serves revision `n` of the monorepo (every Kustomization's directory) and
    /// publishes it on the one GitRepository.
    async fn publish_monorepo(&self, layout: &Layout, n: u32) {
        let files = artifacts::monorepo(
            &layout.kustomizations,
            &layout.run,
            self.args.objects(),
            self.args.object_kinds(),
            n,
            usize::try_from(self.args.artifact_padding_kib * 1024).unwrap_or(usize::MAX),
        );
        let tarball = artifacts::binary_tarball(&files);
        eprintln!(
            "bench: monorepo revision {n}: {} files, {:.1} MiB",
            files.len(),
            tarball.len() as f64 / (1024.0 * 1024.0)
        );
        self.publish_tarball(
            &layout.namespaces[0],
            MONOREPO,
            &revision(&layout.run, n),
            tarball,
        )
        .await;
    }

    /// Serves `files` as a tarball and writes it into the GitRepository's `status.artifact`, as
    /// source-controller would.
    async fn publish_files(
        &self,
        ns: &str,
        name: &str,
        revision: &str,
        files: &[(String, String)],
    ) {
        self.publish_tarball(ns, name, revision, artifacts::tarball(files))
            .await;
    }

    /// Serves `tarball` and writes it into the GitRepository's `status.artifact`.
    async fn publish_tarball(&self, ns: &str, name: &str, revision: &str, tarball: Vec<u8>) {
        let artifact = self.server.publish(tarball);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &git_repository_resource());
        let status = json!({"status": {
            "observedGeneration": 1,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Succeeded",
                "message": format!("stored artifact for revision '{revision}'"),
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1,
            }],
            "artifact": {
                "path": format!("gitrepository/{ns}/{name}/{}.tar.gz", &artifact.digest[7..]),
                "url": artifact.url,
                "revision": revision,
                "digest": artifact.digest,
                "lastUpdateTime": "2026-01-01T00:00:00Z",
                "size": artifact.size,
            },
        }});
        self.own("PATCH", "gitrepositories/status", 1);
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap_or_else(|e| panic!("publish an artifact on {ns}/{name}: {e}"));
    }

    /// The spec fields naming Kustomization `name`'s source: none (its own GitRepository of
    /// the same name, the default) but in `fanout`, where it is its directory of the monorepo.
    fn source_of(&self, layout: &Layout, name: &str) -> Value {
        if self.args.scenario != Scenario::Fanout {
            return json!({});
        }
        json!({
            "path": format!("./{name}/deploy"),
            "sourceRef": {"kind": "GitRepository", "name": MONOREPO,
                          "namespace": layout.namespaces[0]},
        })
    }

    async fn create_kustomization(&self, ns: &str, name: &str, run: &str) {
        self.create_kustomization_with(ns, name, run, json!({}))
            .await;
    }

    /// The shard key of Kustomization `ns/name` with `--shards`: a hash of the name picks one
    /// of `shard1`..`shardN`.
    fn shard_of(&self, ns: &str, name: &str) -> Option<String> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        (self.args.shards > 0).then(|| {
            let mut hasher = DefaultHasher::new();
            (ns, name).hash(&mut hasher);
            format!("shard{}", hasher.finish() % u64::from(self.args.shards) + 1)
        })
    }

    /// Creates a Kustomization of the bench's usual shape, with `extra_spec`'s fields added to
    /// its spec (e.g. `dependsOn`).
    async fn create_kustomization_with(&self, ns: &str, name: &str, run: &str, extra_spec: Value) {
        let shard = self.shard_of(ns, name);
        self.create_kustomization_in(ns, name, run, extra_spec, shard)
            .await;
    }

    /// [`Self::create_kustomization_with`] labelled with shard key `shard`.
    async fn create_kustomization_in(
        &self,
        ns: &str,
        name: &str,
        run: &str,
        extra_spec: Value,
        shard: Option<String>,
    ) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
        let mut manifest = json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": ns, "labels": {RUN_LABEL: run}},
            "spec": {
                "interval": self.args.interval,
                "retryInterval": "10s",
                "prune": true,
                "path": "./deploy",
                "sourceRef": {"kind": "GitRepository", "name": name},
            },
        });
        if let (Some(spec), Value::Object(extra)) = (manifest["spec"].as_object_mut(), extra_spec) {
            spec.extend(extra);
        }
        if let Some(shard) = shard {
            manifest["metadata"]["labels"][process::SHARD_LABEL] = json!(shard);
        }
        let ks: DynamicObject = serde_json::from_value(manifest).expect("Kustomization manifest");
        self.own("POST", "kustomizations", 1);
        api.create(&PostParams::default(), &ks)
            .await
            .unwrap_or_else(|e| panic!("create Kustomization {ns}/{name}: {e}"));
    }

    /// One Kustomization in its own namespace, waited for: proves the controller's caches are
    /// synced before anything is timed.
    /// Returns the time since `started` (the controller's start).
    async fn warm_up(
        &self,
        layout: &Layout,
        started: Instant,
        controller: &Controller,
    ) -> Result<Duration, String> {
        let run = format!("{}-warmup", layout.run);
        if self.args.shards == 0 {
            self.create_kustomization(&layout.warmup_namespace, "warmup", &run)
                .await;
            return self
                .wait_until(&run, 1, &revision(&layout.run, 1), started, controller)
                .await;
        }
        // One per shard, all served by the warm-up GitRepository: every instance is warm.
        for shard in 1..=self.args.shards {
            let spec = json!({"sourceRef": {"kind": "GitRepository", "name": "warmup"}});
            let name = format!("warmup-{shard}");
            let key = Some(format!("shard{shard}"));
            self.create_kustomization_in(&layout.warmup_namespace, &name, &run, spec, key)
                .await;
        }
        let count = usize::try_from(self.args.shards).unwrap_or(usize::MAX);
        self.wait_until(&run, count, &revision(&layout.run, 1), started, controller)
            .await
    }

    /// The counters now.
    fn checkpoint(&self, pids: &[u32]) -> Checkpoint {
        let at = Instant::now();
        let control_plane_cpu = self.control_plane_cpu();
        let requests = self.control_plane.request_counts();
        // The scrape itself shows up in the next checkpoint's counts.
        self.own("GET", "/metrics", 1);
        Checkpoint {
            at,
            cpu: process::cpu_seconds_of(pids).unwrap_or(f64::NAN),
            downloads: self.server.downloads(),
            control_plane_cpu,
            control_plane_cpu_after_scrape: self.control_plane_cpu(),
            requests,
            own: self
                .own_requests
                .lock()
                .expect("own request counter lock")
                .clone(),
        }
    }

    /// kube-apiserver's and etcd's CPU seconds so far.
    fn control_plane_cpu(&self) -> f64 {
        ["kube-apiserver", "etcd"]
            .iter()
            .filter_map(|name| self.control_plane.pid(name))
            .filter_map(process::cpu_seconds)
            .sum()
    }

    /// (a): creates every Kustomization and waits until all have applied revision 1.
    async fn apply_phase(&self, layout: &Layout, pids: &[u32], controller: &Controller) -> Phase {
        eprintln!(
            "bench: (a) creating {} Kustomizations",
            layout.kustomizations.len()
        );
        let started = Instant::now();
        futures::stream::iter(layout.kustomizations.iter())
            .map(|(ns, name)| {
                self.create_kustomization_with(ns, name, &layout.run, self.source_of(layout, name))
            })
            .buffer_unordered(PARALLEL_REQUESTS)
            .collect::<Vec<()>>()
            .await;
        self.wait_for_revision("(a)", layout, 1, started, pids, controller)
            .await
    }

    /// (b): publishes revision 2 on every GitRepository and waits until all have applied it.
    async fn update_phase(&self, layout: &Layout, pids: &[u32], controller: &Controller) -> Phase {
        eprintln!("bench: (b) publishing revision 2 on every GitRepository");
        let started = Instant::now();
        if self.args.scenario == Scenario::Fanout {
            self.publish_monorepo(layout, 2).await;
        } else {
            futures::stream::iter(layout.kustomizations.iter())
                .map(|(ns, name)| self.publish(layout, ns, name, 2))
                .buffer_unordered(PARALLEL_REQUESTS)
                .collect::<Vec<()>>()
                .await;
        }
        self.wait_for_revision("(b)", layout, 2, started, pids, controller)
            .await
    }

    /// Waits until every Kustomization has applied revision `n`, and ends phase `name`; a
    /// phase that times out counts the Kustomizations Ready at that revision by its deadline.
    async fn wait_for_revision(
        &self,
        name: &str,
        layout: &Layout,
        n: u32,
        started: Instant,
        pids: &[u32],
        controller: &Controller,
    ) -> Phase {
        let revision = revision(&layout.run, n);
        let total = layout.kustomizations.len();
        let waited = self
            .wait_until(&layout.run, total, &revision, started, controller)
            .await;
        let timed_out = waited.is_err();
        let mut phase = self.finish_phase(name, waited, pids);
        if timed_out {
            phase.finished_by_deadline = Some(self.ready_count(&layout.run, &revision));
        }
        phase
    }

    /// (idle): `--idle` seconds with every Kustomization Ready and nothing to change: with
    /// `--interval` at most that long, each is reconciled (periodically) at least once.
    async fn idle_phase(&self, layout: &Layout, controller: &Controller) -> (Phase, Idle) {
        eprintln!(
            "bench: (idle) {} s with nothing to change (spec.interval {})",
            self.args.idle, self.args.interval
        );
        let pids = controller.pids();
        let pids = pids.as_slice();
        let fds_before = process::open_fds_of(pids);
        let runs_before = self.reconciles(&layout.run);
        let (_, log_start) = process::error_lines_since(&controller.log, 0);
        let window = Duration::from_secs(self.args.idle);
        tokio::time::sleep(window).await;
        let phase = self.finish_phase("(idle)", Ok(window), pids);
        let expected = format!("Applied revision: {}", revision(&layout.run, 2));
        let not_ready = self
            .matching(&layout.run)
            .iter()
            .filter(|ks| !ready(ks).is_some_and(|(s, _, m)| s == "True" && m == expected))
            .count();
        let idle = Idle {
            memory: process::memory_of(pids).unwrap_or_default(),
            open_fds: (fds_before, process::open_fds_of(pids)),
            reconciles: self.reconciles(&layout.run) - runs_before,
            errors: process::error_lines_since(&controller.log, log_start).0,
            not_ready,
        };
        eprintln!(
            "bench: (idle) {} reconciles, {} error lines, {} not Ready, open fds {:?} -> {:?}",
            idle.reconciles, idle.errors, idle.not_ready, idle.open_fds.0, idle.open_fds.1
        );
        (phase, idle)
    }

    /// Reconciles finished so far by the Kustomizations labelled `run`, as their status
    /// history counts them.
    fn reconciles(&self, run: &str) -> i64 {
        self.matching(run)
            .iter()
            .filter_map(|ks| ks.data.pointer("/status/history"))
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|entry| entry.get("totalReconciliations").and_then(Value::as_i64))
            .sum()
    }

    /// (delete): deletes every Kustomization (one request per namespace) and waits until all
    /// are gone, i.e. the controller pruned their objects and released the finalizers.
    async fn delete_phase(&self, layout: &Layout, pids: &[u32], controller: &Controller) -> Phase {
        eprintln!("bench: (delete) deleting every Kustomization");
        let started = Instant::now();
        self.delete_kustomizations(&layout.namespaces, &layout.run)
            .await;
        let deadline = started + self.timeout();
        let waited = loop {
            let left = self.matching(&layout.run).len();
            if left == 0 {
                break Ok(started.elapsed());
            }
            if Instant::now() >= deadline {
                break Err(format!(
                    "{left} Kustomizations still exist; controller log tail:\n{}",
                    controller.log_tail(10)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        self.finish_phase("(delete)", waited, pids)
    }

    /// Takes the end checkpoint of a phase and reports its outcome on stderr.
    fn finish_phase(&self, name: &str, waited: Result<Duration, String>, pids: &[u32]) -> Phase {
        let end = self.checkpoint(pids);
        let seconds = match waited {
            Ok(elapsed) => {
                eprintln!("bench: {name} done in {:.2}s", elapsed.as_secs_f64());
                Some(elapsed.as_secs_f64())
            }
            Err(e) => {
                eprintln!("bench: {name} timed out: {e}");
                None
            }
        };
        Phase {
            seconds,
            end,
            finished_by_deadline: None,
        }
    }

    async fn delete_kustomizations(&self, namespaces: &[String], run: &str) {
        for ns in namespaces {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
            self.own("DELETECOLLECTION", "kustomizations", 1);
            api.delete_collection(
                &DeleteParams::background(),
                &ListParams::default().labels(&format!("{RUN_LABEL}={run}")),
            )
            .await
            .unwrap_or_else(|e| panic!("delete the Kustomizations in {ns}: {e}"));
        }
    }

    /// The watched Kustomizations labelled with `run`.
    fn matching(&self, run: &str) -> Vec<std::sync::Arc<DynamicObject>> {
        self.kustomizations.state_filter(|ks| {
            ks.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RUN_LABEL))
                .is_some_and(|v| v == run)
        })
    }

    /// Waits until `count` Kustomizations labelled `run` are Ready=True with
    /// "Applied revision: <revision>"; returns the time since `started`.
    async fn wait_until(
        &self,
        run: &str,
        count: usize,
        revision: &str,
        started: Instant,
        controller: &Controller,
    ) -> Result<Duration, String> {
        let expected = format!("Applied revision: {revision}");
        let deadline = started + self.timeout();
        // Each counts once seen Ready: with a short `--interval`, some are always being
        // reconciled again (Ready=Unknown meanwhile), so all are rarely Ready at one instant.
        let mut seen_ready: HashSet<(String, String)> = HashSet::new();
        loop {
            let objects = self.matching(run);
            seen_ready.extend(
                objects
                    .iter()
                    .filter(|ks| ready(ks).is_some_and(|(s, _, m)| s == "True" && m == expected))
                    .map(|ks| (ks.namespace().unwrap_or_default(), ks.name_any())),
            );
            let done = seen_ready.len();
            if done >= count {
                return Ok(started.elapsed());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{done}/{count} applied {revision}; others: {}; controller log tail:\n{}",
                    summarize(&objects, &expected),
                    controller.log_tail(10)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Checks that exactly `per_kustomization` objects per Kustomization exist (all kinds).
    async fn verify(
        &self,
        layout: &Layout,
        per_kustomization: u64,
        phase: &str,
        result: &mut RunResult,
    ) {
        let selector = format!("{RUN_LABEL}={}", layout.run);
        let params = ListParams::default().labels(&selector);
        for resource in ["configmaps", "services", "deployments", "networkpolicies"] {
            self.own("LIST", resource, 1);
        }
        let counts = [
            Api::<ConfigMap>::all(self.client.clone())
                .list_metadata(&params)
                .await
                .map(|l| l.items.len()),
            Api::<Service>::all(self.client.clone())
                .list_metadata(&params)
                .await
                .map(|l| l.items.len()),
            Api::<Deployment>::all(self.client.clone())
                .list_metadata(&params)
                .await
                .map(|l| l.items.len()),
            Api::<NetworkPolicy>::all(self.client.clone())
                .list_metadata(&params)
                .await
                .map(|l| l.items.len()),
        ];
        let found: usize = counts
            .into_iter()
            .map(|c| c.unwrap_or_else(|e| panic!("list the applied objects: {e}")))
            .sum();
        let expected = per_kustomization as usize * layout.kustomizations.len();
        if found != expected {
            result.note(format!(
                "after {phase}: {found} applied objects, expected {expected}"
            ));
        }
    }

    /// Checks that revision 2's change to object 0 reached the cluster (in the first namespace).
    async fn verify_changed(&self, layout: &Layout, result: &mut RunResult) {
        let Some((ns, name)) = layout.kustomizations.first() else {
            return;
        };
        self.own("GET", "configmaps", 1);
        let cm = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
            .get_opt(&format!("{name}-0"))
            .await
            .unwrap_or_else(|e| panic!("get ConfigMap {ns}/{name}-0: {e}"));
        let value = cm
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("value").cloned());
        if value.as_deref() != Some("2") {
            result.note(format!(
                "after (b): ConfigMap {ns}/{name}-0 has value {value:?}, expected \"2\""
            ));
        }
    }

    /// Deletes the warm-up Kustomization (with the controller still running), stops the
    /// controller, then removes what is left: finalizers of stuck Kustomizations, the
    /// GitRepositories and the namespaces (kube-controller-manager finishes deleting them in
    /// the background; the `wait` scenario waits for that).
    async fn clean_up(&self, layout: &Layout, controller: &mut Controller, result: &mut RunResult) {
        let warmup_run = format!("{}-warmup", layout.run);
        self.delete_kustomizations(std::slice::from_ref(&layout.warmup_namespace), &warmup_run)
            .await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.matching(&warmup_run).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !controller.stop() {
            result.note("the controller did not exit within 15 s of SIGTERM".to_string());
        }
        for run in [&layout.run, &warmup_run] {
            for ks in self.matching(run) {
                self.release_finalizers(&ks).await;
            }
        }
        let namespaces = Api::<Namespace>::all(self.client.clone());
        for ns in layout.namespaces.iter().chain([&layout.warmup_namespace]) {
            if !self.args.with_workload_controllers() {
                self.delete_left_objects(ns).await;
            }
            let repos: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &git_repository_resource());
            let _ = repos
                .delete_collection(&DeleteParams::background(), &ListParams::default())
                .await;
            let _ = namespaces.delete(ns, &DeleteParams::background()).await;
        }
    }

    /// Deletes the objects the controller left in `ns` (it is stopped). Without
    /// kube-controller-manager a deleted namespace is never emptied: its objects would stay in
    /// etcd under the next runs.
    async fn delete_left_objects(&self, ns: &str) {
        let params = ListParams::default();
        let background = DeleteParams::background();
        let client = &self.client;
        let _ = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .delete_collection(&background, &params)
            .await;
        let _ = Api::<Deployment>::namespaced(client.clone(), ns)
            .delete_collection(&background, &params)
            .await;
        let _ = Api::<NetworkPolicy>::namespaced(client.clone(), ns)
            .delete_collection(&background, &params)
            .await;
        let services = Api::<Service>::namespaced(client.clone(), ns);
        if let Ok(list) = services.list_metadata(&params).await {
            for service in list.items {
                let _ = services.delete(&service.name_any(), &background).await;
            }
        }
    }

    /// How many Kustomizations labelled `run` are Ready with "Applied revision: <revision>".
    fn ready_count(&self, run: &str, revision: &str) -> usize {
        let expected = format!("Applied revision: {revision}");
        self.matching(run)
            .iter()
            .filter(|ks| ready(ks).is_some_and(|(s, _, m)| s == "True" && m == expected))
            .count()
    }

    /// Drops the finalizers of a Kustomization the controller failed to finish deleting.
    async fn release_finalizers(&self, ks: &DynamicObject) {
        let (Some(ns), Some(name)) = (
            ks.metadata.namespace.as_deref(),
            ks.metadata.name.as_deref(),
        ) else {
            return;
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &kustomization_resource());
        let patch = json!({"metadata": {"finalizers": null}});
        if let Err(e) = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            eprintln!("bench: cannot release the finalizers of {ns}/{name}: {e}");
        }
    }
}

/// API requests between two checkpoints, minus the bench's own and minus Lease requests: the
/// controllers run without leader election, so those are kube-apiserver's own heartbeats (one
/// every 10 s, which would make slower runs look chattier).
fn controller_requests(from: &Checkpoint, to: &Checkpoint) -> BTreeMap<RequestKey, u64> {
    let mut requests = cluster::diff_counts(&from.requests, &to.requests);
    requests.retain(|(_, resource), _| resource != "leases");
    for (key, own) in cluster::diff_counts(&from.own, &to.own) {
        if let Some(count) = requests.get_mut(&key) {
            *count = count.saturating_sub(own);
        }
    }
    requests.retain(|_, n| *n > 0);
    requests
}

/// Requests per verb (dry-run requests under their own key, e.g. `APPLY (dry-run)`).
fn per_verb(requests: &BTreeMap<RequestKey, u64>) -> BTreeMap<String, u64> {
    let mut verbs = BTreeMap::new();
    for ((verb, _), n) in requests {
        *verbs.entry(verb.clone()).or_default() += n;
    }
    verbs
}

/// One line per (verb, resource), most frequent first.
fn breakdown(requests: &BTreeMap<RequestKey, u64>) -> String {
    let mut rows: Vec<(&RequestKey, &u64)> = requests.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    rows.iter()
        .map(|((verb, resource), n)| format!("{n:>8} {verb} {resource}\n"))
        .collect()
}

/// The Ready condition of a Kustomization: (status, reason, message).
fn ready(ks: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = ks.data.get("status")?.get("conditions")?.as_array()?;
    let ready = conditions
        .iter()
        .find(|c| c.get("type") == Some(&Value::from("Ready")))?;
    let text = |key: &str| {
        ready
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Some((text("status"), text("reason"), text("message")))
}

/// "N x status/reason" for the Kustomizations not (yet) at `expected`, plus one message.
fn summarize(objects: &[std::sync::Arc<DynamicObject>], expected: &str) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut example = String::new();
    for ks in objects {
        match ready(ks) {
            Some((status, _, message)) if status == "True" && message == expected => {}
            Some((status, reason, message)) => {
                *counts.entry(format!("{status}/{reason}")).or_default() += 1;
                example = message;
            }
            None => *counts.entry("no Ready condition".to_string()).or_default() += 1,
        }
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} x {k}")).collect();
    format!("{} (e.g. {example:?})", counts.join(", "))
}
