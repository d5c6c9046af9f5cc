//! The `kustomize-controller` binary: Flux-compatible flags, subcommands and start-up.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kustomize_controller::flags::ControllerFlags;
use kustomize_controller::{api, controller, telemetry};

mod command_error;
mod diff_command;
mod offline;

/// Reconciles Flux Kustomizations (kustomize.toolkit.fluxcd.io/v1).
#[derive(Parser)]
// `args_override_self`: a repeated flag takes its last value, as pflag gives it to Flux.
#[command(
    name = "kustomize-controller",
    version,
    about,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: ControllerFlags,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Kustomization CustomResourceDefinition generated from the API types.
    Crd,
    /// Print the kustomize build of a directory, with no cluster needed.
    Build(offline::BuildArgs),
    /// Decrypt one SOPS file as the controller does (like `sops -d`), with no cluster needed.
    Decrypt(offline::DecryptArgs),
    /// Show what applying a Kustomization's build of a local directory would change on the
    /// cluster (exit 0: nothing, 1: changes, 2: error).
    Diff(diff_command::DiffArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return refuse_arguments(&err),
    };
    match cli.command {
        Some(Command::Crd) => match api::crd::crd_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {err}");
                ExitCode::FAILURE
            }
        },
        Some(Command::Build(args)) => offline::run(&args),
        Some(Command::Decrypt(args)) => offline::run_decrypt(&args),
        Some(Command::Diff(args)) => diff_command::run(&args),
        None => run_controller(cli.flags),
    }
}

/// Prints help or the version as asked; for arguments that do not parse, one line naming
/// the flag (clap's first line), and exit code 2, as pflag's `ExitOnError` gives.
fn refuse_arguments(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    let rendered = err.render().to_string();
    let first_line = rendered
        .lines()
        .next()
        .unwrap_or("error: invalid arguments");
    eprintln!("{first_line}");
    ExitCode::from(2)
}

/// Threads of the blocking pool: one per reconcile that may fetch or build at once
/// (`--concurrent`), and two for the short blocking calls beside them (the DNS lookups of a
/// key service call a build waits on, file writes). Every thread that ever ran keeps a malloc
/// arena; with tokio's default of 512, thousands of downloads at start grew fourteen of them.
fn blocking_threads(concurrent: u16) -> usize {
    usize::from(concurrent.max(1)) + 2
}

fn run_controller(flags: ControllerFlags) -> ExitCode {
    if let Err(err) = flags.validate() {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    if let Err(err) = telemetry::init(&flags.log_level, flags.log_encoding) {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    // One thread for the asynchronous work (watches, API requests, status writes): it is
    // I/O-bound, and every CPU-bound stage (artifact extraction, decryption, builds) runs on
    // the blocking pool. Each worker thread would hold a malloc arena of its own, megabytes
    // of resident memory for no throughput on the API server's behalf.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Builds run on the blocking pool; their recursion is bounded, this is the margin.
        .thread_stack_size(8 << 20)
        .max_blocking_threads(blocking_threads(flags.concurrent))
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: failed to start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(controller::run(flags));
    // Dropping the runtime would wait for every blocking task: a build still running past
    // the shutdown grace period must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "controller stopped");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::blocking_threads;

    #[test]
    fn the_blocking_pool_has_a_thread_per_concurrent_reconcile_and_two_spare() {
        assert_eq!(blocking_threads(4), 6);
        assert_eq!(blocking_threads(1), 3);
        // `--concurrent=0` still reconciles one at a time (the permits are at least one).
        assert_eq!(blocking_threads(0), 3);
    }
}
