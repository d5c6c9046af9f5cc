//! Command-line options (and their environment variables) of the `kustomize_build` bench.

use std::path::PathBuf;

use clap::Parser;

/// Builds a generated overlay with the kustomize binary and with ours, side by side, and our
/// library in-process on several threads.
///
/// Usage: `cargo bench --bench kustomize_build -- [OPTIONS]`; every option can also be set
/// through the environment variable shown.
#[derive(Debug, Parser)]
#[command(name = "kustomize_build")]
pub struct Args {
    /// Applications in the generated base (8 objects each, plus 1 from the component).
    #[arg(long, env = "KC_BENCH_APPS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=9999))]
    pub apps: u64,

    /// Timed runs of each binary (alternating, after one untimed warm-up run each); the table
    /// shows the median.
    #[arg(long, env = "KC_BENCH_RUNS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,

    /// The kustomize binary; default: what tests/kustomize/install-kustomize.sh prints.
    #[arg(long, env = "KUSTOMIZE_BIN")]
    pub kustomize: Option<PathBuf>,

    /// Our build command, split on whitespace, the directory appended; default: the
    /// kustomize-controller binary cargo built for this bench, with `build`. Set it to
    /// `"<kustomize> build --reorder none"` to check the harness against kustomize itself.
    #[arg(long, env = "KC_BENCH_OURS_CMD")]
    pub ours_cmd: Option<String>,

    /// Thread counts for the in-process builds, comma-separated; default: 1, 2 and the number
    /// of CPUs.
    #[arg(long, env = "KC_BENCH_THREADS", value_delimiter = ',')]
    pub threads: Vec<usize>,

    /// Builds per thread in each in-process measurement.
    #[arg(long, env = "KC_BENCH_BUILDS_PER_THREAD", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub builds_per_thread: u64,

    /// Skip the in-process builds (c), e.g. while the library cannot build the tree yet (the
    /// variable takes 1/0, true/false, yes/no).
    #[arg(long, env = "KC_BENCH_SKIP_IN_PROCESS",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub skip_in_process: bool,

    /// Generate the tree in this directory (kept afterwards) instead of a temporary one.
    #[arg(long, env = "KC_BENCH_TREE")]
    pub tree: Option<PathBuf>,

    /// Where to write the markdown report; default: target/bench-kustomize-build.md.
    #[arg(long)]
    pub output: Option<PathBuf>,

    /// Passed by `cargo bench` to every bench binary; without it the bench does nothing (so that
    /// `cargo test --all-targets` does not run it).
    #[arg(long, hide = true)]
    pub bench: bool,
}
