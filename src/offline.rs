//! The offline `build` subcommand: the controller's build stage run on a local directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kustomize_controller::api::Kustomization;
use kustomize_controller::build;
use kustomize_controller::kustomize::{LoadRestrictions, yaml};

/// Arguments of `kustomize-controller build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The directory to build.
    dir: PathBuf,
    /// A Kustomization object (YAML file) whose build fields (targetNamespace, namePrefix,
    /// nameSuffix, patches, images, components, commonMetadata, ...) are laid over DIR
    /// exactly as the controller does.
    #[arg(long, value_name = "FILE")]
    kustomization: Option<PathBuf>,
    /// Files may only be read under this directory (the artifact root, for the
    /// controller). Defaults to the filesystem root.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// kustomize's load restrictor for a plain build (with --kustomization the controller's
    /// rule applies: any file under --root).
    #[arg(long, value_enum, default_value_t = Restrictor::LoadRestrictionsRootOnly)]
    load_restrictor: Restrictor,
}

/// kustomize's `--load-restrictor` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
#[value(rename_all = "verbatim")]
enum Restrictor {
    /// Files only under the kustomization's own directory.
    LoadRestrictionsRootOnly,
    /// Any file under --root.
    LoadRestrictionsNone,
}

/// Runs the subcommand: YAML on stdout, or the error on stderr and a non-zero exit.
pub fn run(args: &BuildArgs) -> ExitCode {
    match build_yaml(args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn build_yaml(args: &BuildArgs) -> Result<String, String> {
    let spec = match &args.kustomization {
        Some(file) => Some(read_kustomization(file)?.spec),
        None => None,
    };
    let restrictions = match args.load_restrictor {
        Restrictor::LoadRestrictionsRootOnly => LoadRestrictions::RootOnly,
        Restrictor::LoadRestrictionsNone => LoadRestrictions::None,
    };
    let dir = absolute(&args.dir)?;
    let objects = build::build_offline(&args.root, &dir, spec.as_ref(), restrictions)
        .map_err(|e| e.to_string())?;
    let values: Vec<serde_json::Value> = objects
        .into_iter()
        .map(|o| serde_json::Value::Object(o.into_map()))
        .collect();
    Ok(yaml::to_yaml_stream(&values))
}

fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_kustomization(file: &Path) -> Result<Kustomization, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let docs = yaml::parse_documents(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let doc = docs
        .into_iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some("Kustomization"))
        .ok_or_else(|| format!("{}: no Kustomization object found", file.display()))?;
    serde_json::from_value(doc)
        .map_err(|e| format!("{}: invalid Kustomization: {e}", file.display()))
}
