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

use crate::offline::read_kustomization;

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
        Err(e) => return error(&format!("failed to start the async runtime: {e}")),
    };
    match runtime.block_on(diff_text(args)) {
        Ok(text) if text.is_empty() => ExitCode::SUCCESS,
        Ok(text) => {
            print!("{text}");
            ExitCode::from(CHANGES)
        }
        Err(message) => error(&message),
    }
}

fn error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(ERROR)
}

async fn diff_text(args: &DiffArgs) -> Result<String, String> {
    let from_file = args
        .kustomization_file
        .as_deref()
        .map(read_kustomization)
        .transpose()?;
    let name = match (&args.name, &from_file) {
        (Some(name), _) => name.clone(),
        (None, Some(ks)) => ks.metadata.name.clone().unwrap_or_default(),
        (None, None) => {
            return Err("name a Kustomization on the cluster, or give --kustomization-file".into());
        }
    };
    let namespace = from_file
        .as_ref()
        .and_then(|ks| ks.metadata.namespace.clone())
        .filter(|_| args.name.is_none())
        .unwrap_or_else(|| args.namespace.clone());
    let client = client(args.kubeconfig.as_ref()).await?;
    let api: Api<Kustomization> = Api::namespaced(client.clone(), &namespace);
    let live = api.get_opt(&name).await.map_err(|e| {
        format!(
            "cannot read Kustomization {namespace}/{name}: {}",
            kustomize_controller::client::api_message(&e)
        )
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
            return Err(format!(
                "Kustomization {namespace}/{name} not found (give --kustomization-file to diff one that does not exist yet)"
            ));
        }
    };
    kustomization.metadata.name = Some(name);
    kustomization.metadata.namespace = Some(namespace);
    let dir =
        std::path::absolute(&args.path).map_err(|e| format!("{}: {e}", args.path.display()))?;
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
    let (previews, secrets) = diff::preview(&client, input)
        .await
        .map_err(|e| e.to_string())?;
    Ok(diff::render(&previews, &secrets))
}

/// A client from `kubeconfig`, or from the environment.
async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("invalid kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster configured: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("cannot make a client: {e}"))
}
