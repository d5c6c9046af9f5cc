//! Command-line options of the `controllers` bench.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Runs our kustomize-controller and Flux's Go kustomize-controller, one after the other, against
/// the same local control plane and reports how they compare.
///
/// Usage: `cargo bench --bench controllers -- [OPTIONS]`.
#[derive(Debug, Parser)]
#[command(name = "controllers")]
pub struct Args {
    /// How many Kustomizations to create (each with its own GitRepository, but in `fanout`);
    /// default: 1000 in the `memory` scenario, 500 in `fanout`, 100 in the others. The `noop` scenario always has one.
    #[arg(long)]
    kustomizations: Option<usize>,

    /// What to measure: `apply` (create, new revision, delete of N Kustomizations of
    /// `--objects` objects) or `wait` (N Kustomizations with `wait: true`, one Deployment of 2
    /// replicas each, rolled out by the cluster: create -> all Ready, and last pod Ready ->
    /// Kustomization Ready) or `chain` (N Kustomizations of `--objects` objects created at
    /// once, each `dependsOn` the one before it: create -> each level Ready; use with
    /// `--kustomizations 5 --namespaces 1`) or `noop` (one Kustomization of `--objects`
    /// objects, reconciled `--reconciles` times with nothing to change, then once after 10 of
    /// its ConfigMaps were edited: wall time and API requests per reconcile) or `memory` (idle
    /// RSS after the warm-up and once N Kustomizations of `--objects` objects are Ready) or
    /// `fanout` (`apply` with every Kustomization reading one monorepo source) or
    /// `failing-neighbours` (a new revision on N healthy Kustomizations, alone and beside
    /// `--failing` ones stuck in their health checks) or `big` (one Kustomization of
    /// `--objects` objects, 2000 NetworkPolicies by default: create, a requested no-op
    /// reconcile, a new revision changing every object, delete).
    #[arg(long, value_enum, default_value_t = Scenario::Apply)]
    pub scenario: Scenario,

    /// How many objects each artifact holds; default: 1000 in the `noop` scenario, 2000 in
    /// `big`, 10 in the others.
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    objects: Option<u64>,

    /// The kinds of those objects; default: `mostly-config-maps` in the `noop` and `memory`
    /// scenarios, `network-policies` in `big`, `mixed` in the others (the `wait` scenario has
    /// its own).
    #[arg(long, value_enum)]
    object_kinds: Option<ObjectKinds>,

    /// `noop` scenario: how many no-op reconciles to request, one after the other.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub reconciles: u64,

    /// `noop` scenario: how many periodic reconciles (no request, `spec.interval` elapsed) to
    /// measure after the requested ones.
    #[arg(long, default_value_t = 2)]
    pub periodic: u64,

    /// `noop` scenario: the `spec.interval` the Kustomization gets for the periodic
    /// reconciles; it must leave room for Flux's reconcile of all the objects.
    #[arg(long, default_value = "30s")]
    pub periodic_interval: String,

    /// `memory` scenario: seconds to let the controller settle (idle) before each RSS reading.
    #[arg(long, default_value_t = 10)]
    pub settle: u64,

    /// How many namespaces the Kustomizations are spread across.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub namespaces: u64,

    /// Flux's kustomize-controller binary; default: built (once) by
    /// tests/bench/install-flux-controller.sh.
    #[arg(long)]
    pub flux: Option<PathBuf>,

    /// Our controller binary; default: the one cargo built for this bench (bench profile, which
    /// is the release profile).
    #[arg(long)]
    pub ours: Option<PathBuf>,

    /// How many times to run each implementation (alternating ours, Flux, ours, Flux, ...).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,

    /// Run only one implementation.
    #[arg(long, value_enum, default_value_t = Only::Both)]
    pub only: Only,

    /// `--concurrent` for both controllers.
    #[arg(long, default_value_t = 4)]
    pub concurrent: u32,

    /// An extra flag passed to both controllers (repeatable), e.g. `--controller-arg=--kube-api-qps=100`.
    #[arg(long = "controller-arg", allow_hyphen_values = true)]
    pub controller_args: Vec<String>,

    /// Seconds to wait for each phase before giving up on it.
    #[arg(long, default_value_t = 900)]
    pub timeout: u64,

    /// `spec.interval` of the Kustomizations the bench creates (the `noop` scenario sets its
    /// own for the periodic reconciles).
    #[arg(long, default_value = "60m")]
    pub interval: String,

    /// `apply` scenario: after (b), seconds to leave the controller alone with every
    /// Kustomization Ready and nothing to change (use `--interval` or more, so that each is
    /// reconciled at least once in it); its CPU, API requests and RSS at its end are reported.
    /// 0 leaves the phase out.
    #[arg(long, default_value_t = 0)]
    pub idle: u64,

    /// Run kube-controller-manager, kube-scheduler and kwok beside kube-apiserver in every
    /// scenario, not only in `wait` (which needs them to roll Deployments out). Without them the
    /// Deployments of the other scenarios are stored and never rolled out, and the API server's
    /// load is the controllers' alone.
    #[arg(long)]
    pub workload_controllers: bool,

    /// Run each controller as this many shards, Flux's way: N processes, process i started
    /// with `--watch-label-selector=sharding.fluxcd.io/key in (shard<i>)`, and every
    /// Kustomization labelled with one shard key (by a hash of its name). 0: one process.
    /// CPU, RSS and open files are then summed over the processes.
    #[arg(long, default_value_t = 0)]
    pub shards: u32,

    /// `failing-neighbours` scenario: how many Kustomizations fail their health checks.
    #[arg(long, default_value_t = 100)]
    pub failing: usize,

    /// `fanout` scenario: KiB of incompressible non-manifest files (documentation, images) per
    /// app directory in the monorepo artifact, so that the artifact has a monorepo's size.
    #[arg(long, default_value_t = 40)]
    pub artifact_padding_kib: u64,

    /// Leave the control plane running at the end (stop it with tests/controlplane/down.sh).
    #[arg(long)]
    pub keep_controlplane: bool,

    /// Where to write the markdown report; default: target/bench-controllers.md.
    #[arg(long)]
    pub output: Option<PathBuf>,

    /// Passed by `cargo bench` to every bench binary; without it the bench does nothing (so that
    /// `cargo test --all-targets` does not run it).
    #[arg(long, hide = true)]
    pub bench: bool,
}

/// Which implementations to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Only {
    Both,
    Ours,
    Flux,
}

/// The scenarios the bench knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Create, update and delete N Kustomizations.
    Apply,
    /// Health checks: N Kustomizations with `wait: true`.
    Wait,
    /// Dependency ordering: N Kustomizations created at once, each depending on the one
    /// before it.
    Chain,
    /// API requests and wall time of reconciles that change nothing (and of one that reverts
    /// 10 edited objects) of one Kustomization of many objects.
    Noop,
    /// Idle RSS before and after N Kustomizations are Ready.
    Memory,
    /// Monorepo fan-out: `apply`'s phases with every Kustomization reading one GitRepository
    /// (in the first namespace) whose artifact holds every app's directory plus
    /// `--artifact-padding-kib` of other files per app; artifact downloads are counted.
    Fanout,
    /// Fairness: N healthy Kustomizations and `--failing` ones whose Deployment never becomes
    /// ready (`wait: true`, `timeout: 2m`); a new revision on the healthy ones -> all Ready,
    /// alone and then beside the failing ones.
    FailingNeighbours,
    /// One large Kustomization (`--objects`, 2000 NetworkPolicies by default): create, a
    /// requested reconcile with nothing changed, a new revision changing every object, delete
    /// (every object pruned); each phase's CPU, controller's and API server's.
    Big,
}

/// The kinds of the objects in an artifact, by the object's position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ObjectKinds {
    /// ConfigMap, headless Service, Deployment in turn.
    Mixed,
    /// ConfigMaps, but a headless Service at every position ending in 50 and a Deployment at
    /// every one ending in 99 (of 1000 objects, 10 of each; of 10, none).
    MostlyConfigMaps,
    /// ConfigMaps only.
    ConfigMaps,
    /// NetworkPolicies, but a ConfigMap first (the object a new revision changes): one large
    /// Kustomization of NetworkPolicies is what kustomize-controller#1428 reports slowing down.
    NetworkPolicies,
}

impl Args {
    /// Whether the control plane runs kube-controller-manager, kube-scheduler and kwok.
    pub fn with_workload_controllers(&self) -> bool {
        self.workload_controllers || self.scenario == Scenario::Wait
    }

    /// `--kustomizations`, or the scenario's default.
    pub fn kustomizations(&self) -> usize {
        match (self.scenario, self.kustomizations) {
            (Scenario::Noop | Scenario::Big, _) => 1,
            (_, Some(n)) => n,
            (Scenario::Memory, None) => 1000,
            (Scenario::Fanout, None) => 500,
            (_, None) => 100,
        }
    }

    /// `--objects`, or the scenario's default.
    pub fn objects(&self) -> u64 {
        match (self.scenario, self.objects) {
            (_, Some(n)) => n,
            (Scenario::Noop, None) => 1000,
            (Scenario::Big, None) => 2000,
            (_, None) => 10,
        }
    }

    /// `--object-kinds`, or the scenario's default.
    pub fn object_kinds(&self) -> ObjectKinds {
        match (self.scenario, self.object_kinds) {
            (_, Some(kinds)) => kinds,
            (Scenario::Noop | Scenario::Memory, None) => ObjectKinds::MostlyConfigMaps,
            (Scenario::Big, None) => ObjectKinds::NetworkPolicies,
            (Scenario::Fanout | Scenario::FailingNeighbours, None) => ObjectKinds::ConfigMaps,
            (_, None) => ObjectKinds::Mixed,
        }
    }
}
