//! The `diff` subcommand: what applying a Kustomization's build of a local directory would
//! change on a live cluster, like `kubectl diff` and `flux diff kustomization`. Exit status 0
//! when nothing would change, 1 when something would, 2 on an error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kustomize_controller::api::{Kustomization, KustomizationStatus};
use kustomize_controller::diff::{self, DiffInput};
use kustomize_controller::flags::FeatureGates;
use kustomize_controller::render;

use crate::command_error::CommandError;
use crate::offline::{absolute, read_kustomization, shown};

/// Arguments of `kustomize-controller diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The Kustomization on the cluster: its spec (unless --kustomization-file gives one),
    /// post-build variables, decryption keys and inventory are the live ones.
    name: Option<String>,
    /// The Kustomization's namespace.
    #[arg(short, long, default_value = "flux-system")]
    namespace: String,
    /// The local directory built in place of `spec.path` in the Kustomization's source.
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// A Kustomization object (YAML file) whose spec is used instead of the live one's.
    #[arg(long, value_name = "FILE")]
    kustomization_file: Option<PathBuf>,
    /// The kubeconfig to use; default: $KUBECONFIG, ~/.kube/config, or the in-cluster
    /// service account.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Files may only be read under this directory.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Refuse kustomize remote bases, as the controller does with `--no-remote-bases`.
    #[arg(long, default_value_t = false)]
    no_remote_bases: bool,
}

/// Exit status when applying would change something.
const CHANGES: u8 = 1;
/// Exit status of an error.
const ERROR: u8 = 2;

/// Runs `diff`: the changes on stdout, an error on stderr.
pub fn run(args: &DiffArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return error(&CommandError::Runtime(e)),
    };
    match runtime.block_on(diff_text(args)) {
        Ok(text) if text.is_empty() => ExitCode::SUCCESS,
        Ok(text) => {
            print!("{text}");
            ExitCode::from(CHANGES)
        }
        Err(e) => error(&e),
    }
}

fn error(e: &CommandError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(ERROR)
}

async fn diff_text(args: &DiffArgs) -> Result<String, CommandError> {
    let from_file = args
        .kustomization_file
        .as_deref()
        .map(read_kustomization)
        .transpose()?;
    let name = match (&args.name, &from_file) {
        (Some(name), _) => name.clone(),
        (None, Some(ks)) => ks.metadata.name.clone().unwrap_or_default(),
        (None, None) => {
            return Err(CommandError::NoName);
        }
    };
    let namespace = from_file
        .as_ref()
        .and_then(|ks| ks.metadata.namespace.clone())
        .filter(|_| args.name.is_none())
        .unwrap_or_else(|| args.namespace.clone());
    let client = client(args.kubeconfig.as_ref()).await?;
    let api: Api<Kustomization> = Api::namespaced(client.clone(), &namespace);
    let live = api
        .get_opt(&name)
        .await
        .map_err(|e| CommandError::ReadLive {
            namespace: namespace.clone(),
            name: name.clone(),
            message: kustomize_controller::client::api_message(&e),
        })?;
    let inventory = live
        .as_ref()
        .and_then(|ks| ks.status.as_ref())
        .map(KustomizationStatus::inventory_objects)
        .unwrap_or_default();
    let mut kustomization = match (from_file, live) {
        (Some(ks), _) => ks,
        (None, Some(ks)) => ks,
        (None, None) => {
            return Err(CommandError::NotFound { namespace, name });
        }
    };
    kustomization.metadata.name = Some(name);
    kustomization.metadata.namespace = Some(namespace);
    let dir = absolute(&args.path)?;
    let input = DiffInput {
        kustomization,
        inventory,
        dir,
        root: args.root.clone(),
        settings: render::Settings {
            // The controller's default: `diff` takes no feature gates.
            strict_substitution: FeatureGates::default().enabled("StrictPostBuildSubstitutions"),
            allow_remote_bases: !args.no_remote_bases,
        },
    };
    let (previews, secrets) = diff::preview(&client, input).await?;
    Ok(diff::render(&previews, &secrets))
}

/// A client from `kubeconfig`, or from the environment.
async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, CommandError> {
    let config = match kubeconfig {
        Some(path) => {
            let file =
                Kubeconfig::read_from(path).map_err(|source| CommandError::ReadKubeconfig {
                    path: shown(path),
                    source,
                })?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|source| CommandError::InvalidKubeconfig {
                    path: shown(path),
                    source,
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(CommandError::NoCluster)?,
    };
    kube::Client::try_from(config).map_err(CommandError::Client)
}
