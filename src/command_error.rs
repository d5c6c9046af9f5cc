//! Why a subcommand (`build`, `decrypt`, `diff`) failed: each variant names the file, flag or
//! object at fault; `main` prints it as `error: <sentence>`.

use kustomize::regular_file::FileError;
use kustomize_controller::api::validation::ValidationError;
use kustomize_controller::{diff::DiffError, render::RenderError};

/// A subcommand's failure.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A file could not be read (missing, not a regular file, too large).
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file, as shown to the user.
        file: String,
        /// Why.
        source: FileError,
    },
    /// A path could not be made absolute.
    #[error("{path}: {source}")]
    Path {
        /// The path, as shown to the user.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A `--sops-key` file holds neither kind of key.
    #[error("{file} is neither an age identity file nor an armored OpenPGP key")]
    NotAKey {
        /// The key file.
        file: String,
    },
    /// A `--sops-key` file holds a key sops cannot use.
    #[error("failed to import SOPS key {file}: {source}")]
    ImportKey {
        /// The key file.
        file: String,
        /// Why.
        source: sops::KeyError,
    },
    /// The key service clients could not be built.
    #[error("cannot start the key service client: {0}")]
    KeyServices(std::io::Error),
    /// `decrypt` could not decrypt its file.
    #[error("failed to decrypt {file}: {source}")]
    Decrypt {
        /// The encrypted file.
        file: String,
        /// Why.
        source: sops::DecryptError,
    },
    /// A line of a `--var-file` is not `NAME=VALUE`.
    #[error("{file}: line {line}: expected NAME=VALUE")]
    VarFileLine {
        /// The variables file.
        file: String,
        /// The line number, from 1.
        line: usize,
    },
    /// A `--var` flag is not `NAME=VALUE`.
    #[error("--var: expected NAME=VALUE")]
    VarFlag,
    /// A `--kustomization` file is not YAML.
    #[error("{file}: {source}")]
    KustomizationYaml {
        /// The file.
        file: String,
        /// Why.
        source: goyaml::YamlError,
    },
    /// A `--kustomization` file holds no Kustomization.
    #[error("{file}: no Kustomization object found")]
    NoKustomization {
        /// The file.
        file: String,
    },
    /// The Kustomization is one the API server would refuse.
    #[error("{file}: {source}")]
    InvalidKustomization {
        /// The file.
        file: String,
        /// Which field, and why.
        source: ValidationError,
    },
    /// The Kustomization does not decode into the API type.
    #[error("{file}: invalid Kustomization: {source}")]
    DecodeKustomization {
        /// The file.
        file: String,
        /// Why.
        source: serde_json::Error,
    },
    /// The async runtime could not start.
    #[error("failed to start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The build failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// `diff` was given neither a name nor a Kustomization file.
    #[error("name a Kustomization on the cluster, or give --kustomization-file")]
    NoName,
    /// The live Kustomization could not be read.
    #[error("cannot read Kustomization {namespace}/{name}: {message}")]
    ReadLive {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API server's answer.
        message: String,
    },
    /// The Kustomization is not on the cluster and no file gives it.
    #[error(
        "Kustomization {namespace}/{name} not found (give --kustomization-file to diff one that does not exist yet)"
    )]
    NotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The kubeconfig file could not be read.
    #[error("cannot read kubeconfig {path}: {source}")]
    ReadKubeconfig {
        /// The kubeconfig file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig does not describe a usable cluster.
    #[error("invalid kubeconfig {path}: {source}")]
    InvalidKubeconfig {
        /// The kubeconfig file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and none could be inferred.
    #[error("no cluster configured: {0}")]
    NoCluster(kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("cannot make a client: {0}")]
    Client(kube::Error),
    /// `diff` could not preview the changes.
    #[error(transparent)]
    Diff(#[from] DiffError),
}
