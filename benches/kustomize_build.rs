//! Side-by-side benchmark of `kustomize build`: the real kustomize binary against our native
//! engine, on a generated overlay of several thousand objects.
//!
//! ```text
//! cargo bench --bench kustomize_build -- [--apps N] [--runs R] [--kustomize PATH] [...]
//! ```
//!
//! (a) `kustomize build --reorder none DIR` and (b) `kustomize-controller build DIR` (the binary
//! cargo builds for this bench, release settings) each run once untimed, then `--runs` times
//! alternating: wall time from spawn to exit, peak RSS from GNU time. (c) our library's
//! `build()` in this process on 1, 2 and #CPU threads: builds/second. Before anything is
//! reported, every build's (kind, namespace, name) multiset must equal kustomize's, or the bench
//! fails. The table goes to stdout and to target/bench-kustomize-build.md.

#[path = "kustomize_build/args.rs"]
mod args;
#[path = "kustomize_build/compare.rs"]
mod compare;
#[path = "kustomize_build/generate.rs"]
mod generate;
#[path = "kustomize_build/in_process.rs"]
mod in_process;
#[path = "kustomize_build/measure.rs"]
mod measure;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Parser;

use args::Args;
use compare::Ids;
use in_process::Throughput;
use measure::{RssProbe, Sample};

fn main() {
    // `cargo test --all-targets` builds and runs bench targets too, without the `--bench` flag
    // `cargo bench` passes: do nothing then.
    if !std::env::args().any(|arg| arg == "--bench") {
        eprintln!(
            "kustomize_build: not run by `cargo bench`; skipping. Run it with \
             `cargo bench --bench kustomize_build -- [OPTIONS]`"
        );
        return;
    }
    run(Args::parse());
}

/// The two commands under test.
struct Commands {
    kustomize: Vec<String>,
    ours: Vec<String>,
    kustomize_version: String,
}

fn run(args: Args) {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root.join("target"));
    let commands = commands(&args, &repo_root);
    eprintln!("bench: kustomize = `{}`", commands.kustomize.join(" "));
    eprintln!("bench: ours      = `{}`", commands.ours.join(" "));

    let temp = tempfile::tempdir().expect("create a temporary directory");
    let root = match &args.tree {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
            dir.clone()
        }
        None => temp.path().to_path_buf(),
    };
    let tree = generate::generate(&root, args.apps as usize);
    eprintln!(
        "bench: generated {} files under {}; building {}",
        tree.files,
        root.display(),
        tree.build_dir.display()
    );

    let probe = RssProbe::detect();
    let load_before = load_average();
    let side_by_side = side_by_side(&args, &commands, &tree, &root, &probe);
    let in_process = if args.skip_in_process {
        None
    } else {
        Some(in_process(
            &args,
            &root,
            &tree.build_dir,
            &side_by_side.reference,
        ))
    };
    let load_after = load_average();

    let report = format!(
        "{}\n{}{}",
        header(&args, &commands, &tree, &probe, &load_before, &load_after),
        side_by_side.table(),
        in_process.map_or_else(
            || "\n(c) in-process builds: skipped (`--skip-in-process`).\n".to_string(),
            |rows| in_process_table(&rows, args.builds_per_thread)
        ),
    );
    println!("{report}");
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| target_dir.join("bench-kustomize-build.md"));
    std::fs::write(&output, &report).unwrap_or_else(|e| panic!("write {}: {e}", output.display()));
    eprintln!("bench: report written to {}", output.display());
}

/// The kustomize command and ours, from the options or their defaults.
fn commands(args: &Args, repo_root: &Path) -> Commands {
    let kustomize_bin = args
        .kustomize
        .clone()
        .unwrap_or_else(|| install_kustomize(repo_root));
    assert!(
        kustomize_bin.is_file(),
        "the kustomize binary {} does not exist",
        kustomize_bin.display()
    );
    let kustomize_version = version_of(&kustomize_bin);
    let kustomize = vec![
        kustomize_bin.display().to_string(),
        "build".to_string(),
        "--reorder".to_string(),
        "none".to_string(),
    ];
    let ours = match &args.ours_cmd {
        Some(cmd) => cmd.split_whitespace().map(str::to_string).collect(),
        None => vec![
            env!("CARGO_BIN_EXE_kustomize-controller").to_string(),
            "build".to_string(),
        ],
    };
    assert!(!ours.is_empty(), "KC_BENCH_OURS_CMD / --ours-cmd is empty");
    Commands {
        kustomize,
        ours,
        kustomize_version,
    }
}

/// Runs tests/kustomize/install-kustomize.sh (a no-op once the binary is cached) and returns the
/// path it prints last.
fn install_kustomize(repo_root: &Path) -> PathBuf {
    let script = repo_root.join("tests/kustomize/install-kustomize.sh");
    assert!(
        script.is_file(),
        "{} does not exist: set KUSTOMIZE_BIN (or --kustomize) to a kustomize v5.8 binary, e.g. \
         one built with `GOBIN=/tmp/kz go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2`",
        script.display()
    );
    eprintln!("bench: getting kustomize with {}", script.display());
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed ({}); set KUSTOMIZE_BIN to a binary installed elsewhere",
        script.display(),
        output.status
    );
    PathBuf::from(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim(),
    )
}

/// `kustomize version`'s first line, or "unknown version".
fn version_of(binary: &Path) -> String {
    Command::new(binary)
        .arg("version")
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            text.lines().next().map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "unknown version".to_string())
}

/// What (a) and (b) measured.
struct SideBySide {
    kustomize: Vec<Sample>,
    ours: Vec<Sample>,
    /// The ids kustomize printed (every other build is checked against them).
    reference: Ids,
    /// Whether the two outputs (of the last runs) are byte for byte the same.
    bytes: String,
}

/// (a) and (b): one untimed run each (warms the page cache, checks the outputs), then `runs`
/// timed runs alternating.
fn side_by_side(
    args: &Args,
    commands: &Commands,
    tree: &generate::Tree,
    root: &Path,
    probe: &RssProbe,
) -> SideBySide {
    let dir = &tree.build_dir;
    eprintln!("bench: warm-up and output check");
    let kustomize_out = measure::run(&commands.kustomize, dir, root, probe);
    let reference = Ids::from_yaml_stream("kustomize", &kustomize_out.stdout);
    assert_eq!(
        reference.documents(),
        tree.expected_objects,
        "kustomize printed {} objects, the generator expects {}: the generated tree or the \
         bench's expectations are wrong ({})",
        reference.documents(),
        tree.expected_objects,
        reference.kinds()
    );
    let ours_out = measure::run(&commands.ours, dir, root, probe);
    reference.assert_same(
        "kustomize",
        &Ids::from_yaml_stream("ours", &ours_out.stdout),
        "ours",
    );
    eprintln!(
        "bench: both builds print the same {} objects ({})",
        reference.documents(),
        reference.kinds()
    );

    let (mut kustomize, mut ours) = (Vec::new(), Vec::new());
    for index in 1..=args.runs {
        for (name, command, samples) in [
            ("kustomize", &commands.kustomize, &mut kustomize),
            ("ours", &commands.ours, &mut ours),
        ] {
            let sample = measure::run(command, dir, root, probe);
            let ids = Ids::from_yaml_stream(name, &sample.stdout);
            reference.assert_same("kustomize (warm-up)", &ids, name);
            eprintln!(
                "bench: run {index}/{}: {name} {:.3}s, peak RSS {}",
                args.runs,
                sample.seconds,
                sample.peak_rss_kib.map_or("?".to_string(), |kib| format!(
                    "{:.1} MiB",
                    kib as f64 / 1024.0
                ))
            );
            samples.push(sample);
        }
    }
    let bytes = compare::byte_comparison(&kustomize_out.stdout, &ours_out.stdout);
    SideBySide {
        kustomize,
        ours,
        reference,
        bytes,
    }
}

impl SideBySide {
    /// `metric | kustomize | ours | ratio (kustomize/ours)`: medians, every run in parentheses.
    fn table(&self) -> String {
        let seconds = |samples: &[Sample]| samples.iter().map(|s| s.seconds).collect::<Vec<_>>();
        let rss = |samples: &[Sample]| {
            samples
                .iter()
                .filter_map(|s| s.peak_rss_kib)
                .map(|kib| kib as f64 / 1024.0)
                .collect::<Vec<_>>()
        };
        let bytes = |samples: &[Sample]| {
            samples
                .iter()
                .map(|s| s.stdout.len() as f64 / 1024.0)
                .collect::<Vec<_>>()
        };
        let mut out = String::from(
            "| metric | kustomize | ours | ratio (kustomize/ours) |\n|---|---:|---:|---:|\n",
        );
        out.push_str(&row(
            "wall time (s)",
            &seconds(&self.kustomize),
            &seconds(&self.ours),
            3,
        ));
        out.push_str(&row(
            "peak RSS (MiB)",
            &rss(&self.kustomize),
            &rss(&self.ours),
            1,
        ));
        out.push_str(&row(
            "output (KiB)",
            &bytes(&self.kustomize),
            &bytes(&self.ours),
            0,
        ));
        out.push_str(&format!(
            "\nBoth print the same {} objects ({}); output bytes: {}.\n",
            self.reference.documents(),
            self.reference.kinds(),
            self.bytes
        ));
        out
    }
}

/// One table row; with several runs a cell is "median (v1 / v2 / ...)".
fn row(name: &str, kustomize: &[f64], ours: &[f64], decimals: usize) -> String {
    let ratio = match (measure::median(kustomize), measure::median(ours)) {
        (Some(k), Some(o)) if o > 0.0 => format!("{:.2}", k / o),
        _ => "–".to_string(),
    };
    format!(
        "| {name} | {} | {} | {ratio} |\n",
        cell(kustomize, decimals),
        cell(ours, decimals)
    )
}

fn cell(values: &[f64], decimals: usize) -> String {
    let Some(median) = measure::median(values) else {
        return "–".to_string();
    };
    if values.len() == 1 {
        return format!("{median:.decimals$}");
    }
    let all: Vec<String> = values.iter().map(|v| format!("{v:.decimals$}")).collect();
    format!("{median:.decimals$} ({})", all.join(" / "))
}

/// (c): checks one library build against kustomize's ids, then measures every thread count.
fn in_process(args: &Args, root: &Path, dir: &Path, reference: &Ids) -> Vec<Throughput> {
    eprintln!("bench: (c) in-process library builds");
    let objects = in_process::build_once(root, dir);
    reference.assert_same(
        "kustomize",
        &Ids::from_objects(&objects),
        "the library (in-process)",
    );
    drop(objects);
    thread_counts(&args.threads)
        .into_iter()
        .map(|threads| {
            let result = in_process::measure(root, dir, threads, args.builds_per_thread);
            eprintln!(
                "bench: (c) {threads} thread(s): {} builds in {:.3}s = {:.2} builds/s",
                result.builds,
                result.seconds,
                result.rate()
            );
            result
        })
        .collect()
}

/// The requested thread counts, or 1, 2 and #CPUs; sorted, without duplicates or zeros.
fn thread_counts(requested: &[usize]) -> Vec<usize> {
    let mut counts = if requested.is_empty() {
        vec![1, 2, cpus()]
    } else {
        requested.to_vec()
    };
    counts.retain(|&n| n > 0);
    counts.sort_unstable();
    counts.dedup();
    counts
}

fn in_process_table(rows: &[Throughput], builds_per_thread: u64) -> String {
    let single = rows.iter().find(|r| r.threads == 1).map(Throughput::rate);
    let mut out = format!(
        "\n(c) our library's `build()` in-process, {builds_per_thread} builds per thread, all \
         threads started together:\n\n\
         | threads | builds | seconds | builds/s | speedup vs 1 thread |\n|---:|---:|---:|---:|---:|\n"
    );
    for row in rows {
        let speedup = single.map_or("–".to_string(), |s| format!("{:.2}", row.rate() / s));
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.2} | {speedup} |\n",
            row.threads,
            row.builds,
            row.seconds,
            row.rate()
        ));
    }
    out
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The first three fields of /proc/loadavg.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// What was run, on what.
fn header(
    args: &Args,
    commands: &Commands,
    tree: &generate::Tree,
    probe: &RssProbe,
    load_before: &str,
    load_after: &str,
) -> String {
    format!(
        "# kustomize build: kustomize vs ours\n\n\
         - tree: {} apps x {} objects + {} (generated, {} files): base of per-app kustomizations \
         (labels, configMapGenerator), a Component (generator, annotations, label-selected \
         patch) and the built overlay (namespace, namePrefix, commonLabels, images, replicas, \
         generator merge, label-selected strategic-merge patches, a JSON 6902 patch)\n\
         - kustomize: `{}` ({})\n\
         - ours: `{}`{}\n\
         - {} timed run(s) each, alternating, after one untimed warm-up run each; wall time from \
         spawn to exit; peak RSS: {}\n\
         - machine: {} CPUs, load average {load_before} before, {load_after} after\n\
         - lower is better; ratio > 1 means kustomize took more than ours\n",
        args.apps,
        generate::OBJECTS_PER_APP,
        generate::EXTRA_OBJECTS,
        tree.files,
        commands.kustomize.join(" "),
        commands.kustomize_version,
        commands.ours.join(" "),
        if args.ours_cmd.is_none() {
            format!(" (built by cargo from {})", source_version())
        } else {
            String::new()
        },
        args.runs,
        probe.describe(),
        cpus(),
    )
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
