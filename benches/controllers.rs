//! Side-by-side benchmark: our kustomize-controller against Flux's Go kustomize-controller, on
//! the same local control plane (tests/controlplane/up.sh in target/bench-controlplane).
//!
//! ```text
//! cargo bench --bench controllers -- [--kustomizations N] [--objects M] [--flux PATH] [--runs R]
//! cargo bench --bench controllers -- --scenario noop|memory|wait|chain|fanout|failing-neighbours|big [...]
//! ```
//!
//! For each implementation in turn (never both at once: they would fight over the same
//! objects), on fresh namespaces: start the controller, wait for one warm-up Kustomization, then
//! (a) create N Kustomizations, each with its own GitRepository whose artifact holds M objects,
//! and time until all are Ready with "Applied revision"; (b) publish a new revision on every
//! GitRepository (one object changed, one removed) and time until all report it; (delete)
//! delete them all and time until every finalizer is released. Controller RSS and CPU come from
//! /proc, API request counts from kube-apiserver's `apiserver_request_total` (minus the bench's
//! own requests). The table goes to stdout and to target/bench-controllers.md. Other
//! scenarios (`--scenario`, see `--help`) measure health checks, dependency chains, no-op
//! reconciles and idle memory, each into target/bench-controllers-<scenario>.md.
//!
//! Our binary is the one cargo builds for this bench (the bench profile inherits `release`);
//! Flux's is built once by tests/bench/install-flux-controller.sh unless `--flux` names one.

#[path = "controllers/args.rs"]
mod args;
#[path = "controllers/artifacts.rs"]
mod artifacts;
#[path = "controllers/cluster.rs"]
mod cluster;
#[path = "controllers/process.rs"]
mod process;
#[path = "controllers/report.rs"]
mod report;
#[path = "controllers/scenario.rs"]
mod scenario;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::{Parser, ValueEnum};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use args::{Args, ObjectKinds, Only, Scenario};
use scenario::{Bench, Implementation};

fn main() {
    // `cargo test --all-targets` (tests/run.sh) builds and runs bench targets too, without the
    // `--bench` flag `cargo bench` passes: do nothing then, this takes minutes.
    if !std::env::args().any(|arg| arg == "--bench") {
        eprintln!(
            "controllers: not run by `cargo bench`; skipping. Run it with \
             `cargo bench --bench controllers -- [OPTIONS]`"
        );
        return;
    }
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    runtime.block_on(run(args));
}

/// Sets up, measures every implementation `--runs` times, writes the report.
async fn run(args: Args) {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root.join("target"));
    let implementations = implementations(&args, &repo_root);
    for implementation in &implementations {
        eprintln!(
            "bench: {} = {}",
            implementation.name,
            implementation.binary.display()
        );
    }

    // Two state folders: a reused control plane keeps the processes it was started with.
    let (state_dir, workload_controllers) = if args.with_workload_controllers() {
        ("bench-controlplane", true)
    } else {
        ("bench-controlplane-bare", false)
    };
    let control_plane = cluster::ControlPlane::up(
        &repo_root,
        &target_dir.join(state_dir),
        workload_controllers,
        args.keep_controlplane,
    );
    let client = control_plane.client().await;
    let server = artifacts::ArtifactServer::start();
    let (kustomizations, watch) = watch_kustomizations(&client).await;
    let work_dir = target_dir.join("bench-controllers");
    let bench = Bench::new(
        &control_plane,
        client,
        &server,
        kustomizations,
        &args,
        work_dir,
    );

    let load_before = load_average();
    let mut results = Vec::new();
    for index in 1..=args.runs {
        for implementation in &implementations {
            results.push(match args.scenario {
                Scenario::Apply | Scenario::Fanout => bench.run(implementation, index).await,
                Scenario::Wait => bench.run_wait(implementation, index).await,
                Scenario::Chain => bench.run_chain(implementation, index).await,
                Scenario::FailingNeighbours => {
                    bench.run_failing_neighbours(implementation, index).await
                }
                Scenario::Noop => bench.run_noop(implementation, index).await,
                Scenario::Memory => bench.run_memory(implementation, index).await,
                Scenario::Big => bench.run_big(implementation, index).await,
            });
        }
    }
    let load_after = load_average();
    // Before the control plane stops: a watch left open makes kube-apiserver's shutdown slow.
    watch.abort();

    let headlines = scenario::headlines(&args);
    let headline_table = if headlines.is_empty() {
        String::new()
    } else {
        format!("{}\n", report::headlines(&results, &headlines))
    };
    let report = format!(
        "{}\n{headline_table}{}{}",
        header(&args, &implementations, &load_before, &load_after),
        report::table(&results),
        notes(&results)
    );
    println!("{report}");
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| target_dir.join(report_name(args.scenario)));
    std::fs::write(&output, &report).unwrap_or_else(|e| panic!("write {}: {e}", output.display()));
    eprintln!("bench: report written to {}", output.display());
}

/// The report's default file name: bench-controllers.md for the `apply` scenario,
/// bench-controllers-<scenario>.md for the others.
fn report_name(scenario: Scenario) -> String {
    match scenario {
        Scenario::Apply => "bench-controllers.md".to_string(),
        other => format!(
            "bench-controllers-{}.md",
            other
                .to_possible_value()
                .map_or("other".to_string(), |v| v.get_name().to_string())
        ),
    }
}

/// The implementations to run, in order.
fn implementations(args: &Args, repo_root: &Path) -> Vec<Implementation> {
    let mut list = Vec::new();
    if args.only != Only::Flux {
        let binary = args
            .ours
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kustomize-controller")));
        assert!(
            binary.is_file(),
            "our controller binary {} does not exist",
            binary.display()
        );
        list.push(Implementation {
            name: "ours",
            binary,
        });
    }
    if args.only != Only::Ours {
        let binary = args
            .flux
            .clone()
            .unwrap_or_else(|| install_flux_controller(repo_root));
        list.push(Implementation {
            name: "Flux",
            binary,
        });
    }
    list
}

/// Runs tests/bench/install-flux-controller.sh (a no-op once the binary is cached) and returns
/// the path it prints.
fn install_flux_controller(repo_root: &Path) -> PathBuf {
    let script = repo_root.join("tests/bench/install-flux-controller.sh");
    eprintln!(
        "bench: getting Flux's kustomize-controller with {} (the first run builds it: minutes)",
        script.display()
    );
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed ({}); pass --flux PATH to use a binary built elsewhere",
        script.display(),
        output.status
    );
    let path = PathBuf::from(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim(),
    );
    assert!(
        path.is_file(),
        "{} printed no binary path",
        script.display()
    );
    path
}

/// A store of every Kustomization carrying the bench's run label, fed by a watch that runs
/// until the returned task is aborted. Returns once the initial list is in.
async fn watch_kustomizations(
    client: &kube::Client,
) -> (reflector::Store<DynamicObject>, tokio::task::JoinHandle<()>) {
    let resource = scenario::kustomization_resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let config = watcher::Config::default().labels(scenario::RUN_LABEL);
    let stream = reflector(writer, watcher(api, config)).default_backoff();
    let task = tokio::spawn(async move {
        stream
            .for_each(|event| async move {
                if let Err(e) = event {
                    eprintln!("bench: Kustomization watch error: {e}");
                }
            })
            .await;
    });
    store
        .wait_until_ready()
        .await
        .expect("the Kustomization watch stopped before its first list");
    (store, task)
}

/// The first line of /proc/loadavg (the machine is shared: this says how busy it was).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// What was run, on what.
fn header(
    args: &Args,
    implementations: &[Implementation],
    load_before: &str,
    load_after: &str,
) -> String {
    let kinds = match args.object_kinds() {
        ObjectKinds::Mixed => "ConfigMap, headless Service, Deployment in turn",
        ObjectKinds::MostlyConfigMaps => {
            "ConfigMaps; a headless Service and a Deployment in every hundred"
        }
        ObjectKinds::ConfigMaps => "ConfigMaps",
        ObjectKinds::NetworkPolicies => "NetworkPolicies after one ConfigMap",
    };
    let objects = format!("{} objects ({kinds})", args.objects());
    let (kustomizations, namespaces) = match args.scenario {
        Scenario::Noop | Scenario::Big => (1, 1),
        _ => (args.kustomizations(), args.namespaces),
    };
    let workload = match args.scenario {
        Scenario::Wait => "`wait: true` and one Deployment of 2 replicas rolled out by the \
                           cluster (kube-controller-manager, kube-scheduler, kwok)"
            .to_string(),
        Scenario::Noop => format!(
            "{objects}; {} no-op reconcile(s), then one after 10 edits",
            args.reconciles
        ),
        Scenario::Fanout => format!(
            "{objects}, each its directory of one monorepo GitRepository with {} KiB of \
             other files per directory",
            args.artifact_padding_kib
        ),
        Scenario::FailingNeighbours => format!(
            "{objects}, beside {} Kustomizations whose Deployment never becomes ready \
             (`wait: true`, `timeout: 2m`)",
            args.failing
        ),
        Scenario::Big => format!(
            "{objects}; create, a requested reconcile with nothing changed, a new revision \
             changing every object, delete"
        ),
        Scenario::Apply | Scenario::Chain | Scenario::Memory => objects,
    };
    let mut text = format!(
        "# kustomize-controller: ours vs Flux\n\n\
         - {kustomizations} Kustomization(s) x {workload} in {namespaces} \
         namespace(s){}; `--concurrent={}`{}; {} run(s) per \
         implementation, alternating{}\n",
        if args.scenario == Scenario::Fanout {
            ""
        } else {
            ", one GitRepository each"
        },
        args.concurrent,
        args.controller_args
            .iter()
            .map(|a| format!(" `{a}`"))
            .collect::<String>(),
        args.runs,
        if args.shards > 0 {
            format!(
                "; each implementation runs as {} shards (one process per \
                 `sharding.fluxcd.io/key`; CPU, RSS and file descriptors summed over them)",
                args.shards
            )
        } else {
            String::new()
        },
    );
    for implementation in implementations {
        let origin = if implementation.name == "ours" && args.ours.is_none() {
            format!(" (built by cargo from {})", source_version())
        } else {
            String::new()
        };
        text.push_str(&format!(
            "- {}: `{}`{origin}\n",
            implementation.name,
            implementation.binary.display()
        ));
    }
    text.push_str(if args.with_workload_controllers() {
        "- cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (2 fake \
         nodes)\n"
    } else {
        "- cluster: etcd and kube-apiserver only (Deployments are stored, not rolled out)\n"
    });
    if matches!(args.scenario, Scenario::Apply | Scenario::Fanout) {
        text.push_str(&format!("- `spec.interval: {}`\n", args.interval));
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    text.push_str(&format!(
        "- machine: {cpus} CPUs, load average {load_before} before, {load_after} after (shared \
         machine: CPU noise)\n"
    ));
    text.push_str(match args.scenario {
        Scenario::Apply | Scenario::Fanout => {
            "- lower is better everywhere; ratio > 1 means Flux took more than ours. Artifact \
             downloads are the bench's artifact server's 200 answers. API requests \
             are the controller's: apiserver_request_total minus the bench's own requests and \
             minus Lease requests (kube-apiserver's heartbeats; leader election is off), +-1 for \
             the bench's watch. Per-resource counts: \
             target/bench-controllers/<run id>/requests.txt\n"
        }
        Scenario::Wait => {
            "- lower is better everywhere; ratio > 1 means Flux took more than ours. \"all Ready\" \
             and the gaps use the receive times of the bench's own watch events on the run's \
             pods and Kustomizations (first event showing Ready=True); a Kustomization's last pod \
             is the later of its 2 pods. Peak RSS and CPU are the controller's, from start to \
             all Ready. Controller logs: target/bench-controllers/<run id>/controller.log\n"
        }
        Scenario::Chain => {
            "- lower is better everywhere; ratio > 1 means Flux took more than ours. The \
             Kustomizations are created at once, `ks-k` with `dependsOn: ks-(k-1)`; level k's \
             time is when the bench's watch first saw it Ready with \"Applied revision\" \
             (polled every 50 ms). Both controllers run with their default \
             `--requeue-dependency` (30 s). Controller logs: \
             target/bench-controllers/<run id>/controller.log\n"
        }
        Scenario::Noop => {
            "- each reconcile is requested with a new `reconcile.fluxcd.io/requestedAt` value \
             once the one before was handled; its time runs from the annotation patch until the \
             bench's watch (looked at every 10 ms) shows `status.lastHandledReconcileAt` equal \
             to it and Ready=True. Its API requests are counted from just before the patch to \
             2 s after that, as in the `apply` scenario (apiserver_request_total minus the \
             bench's own requests and Lease requests; other clients such as \
             kube-controller-manager are not told apart: the idle row shows how many they make \
             in 5 s). Cost per reconcile: the controller's CPU plus kube-apiserver's and \
             etcd's over the same span, less their CPU rate in those 5 s. Drift: 10 \
             ConfigMaps merge-patched by the field manager `kubectl-edit` just before the \
             request. Per (verb, resource), per reconcile: \
             target/bench-controllers/<run id>/requests.txt\n"
        }
        Scenario::FailingNeighbours => {
            "- lower is better; ratio > 1 means Flux took more than ours. (b) and (c) publish a \
             new revision on every healthy Kustomization's GitRepository and time until all are \
             Ready with it, (b) alone, (c) once the failing ones have applied and wait on their \
             health checks. Controller logs: target/bench-controllers/<run id>/controller.log\n"
        }
        Scenario::Big => {
            "- lower is better; ratio > 1 means Flux took more than ours. The no-op reconcile \
             is requested with `reconcile.fluxcd.io/requestedAt` and runs from the annotation \
             patch until `status.lastHandledReconcileAt` shows it with Ready=True; its CPU and \
             requests are counted until 2 s after that. Cost per reconcile: the controller's \
             CPU plus kube-apiserver's and etcd's over the phase; cores busy: that CPU over the \
             phase's wall time (2 at most on this machine). Controller logs: \
             target/bench-controllers/<run id>/controller.log\n"
        }
        Scenario::Memory => {
            "- RSS is VmRSS from /proc/<pid>/status, read after `--settle` seconds with nothing \
             to do: once after the warm-up (baseline), once after all N Kustomizations are \
             Ready. Lower is better; ratio > 1 means Flux used more than ours\n"
        }
    });
    text
}

/// `git describe --always --dirty` of the repository, or "an unknown revision".
fn source_version() -> String {
    Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "describe",
            "--always",
            "--dirty",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| format!("`{}`", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| "an unknown revision".to_string())
}

/// The runs' notes, if any, as a list under the table.
fn notes(results: &[report::RunResult]) -> String {
    let mut text = String::new();
    for result in results {
        for note in &result.notes {
            text.push_str(&format!("- note ({}): {note}\n", result.implementation));
        }
    }
    if text.is_empty() {
        text
    } else {
        format!("\n{text}")
    }
}
