#![doc = include_str!("../README.md")]
//!
//! ## Purity
//!
//! Pure: files in, objects out. No Kubernetes client, no network code, no global state;
//! builds may run in parallel. Remote resources are read only through a
//! [`RemoteFetcher`] the embedding program passes in ([`BuildOptions::remote_fetcher`]).

pub mod budget;
pub mod build_annotations;
pub mod config;
mod config_defaults;
pub mod crds;
pub mod fieldspec;
pub mod generators;
pub mod gojson;
pub mod goregex;
pub mod hash;
pub mod json6902;
pub mod json_numbers;
pub mod kustfile;
pub mod loader;
pub mod namereference;
pub mod openapi;
pub mod patch;
pub mod regular_file;
pub mod remote;
pub mod replacements;
pub mod resource;
pub mod selector;
pub mod smp;
pub mod smp_schema;
pub mod target;
pub mod transformers;
pub mod vars;

pub use loader::LoadRestrictions;
pub use remote::{ClonedRepo, RemoteError, RemoteFetcher, RepoSpec};
pub use resource::Object;
pub use target::{BuildError, BuildOptions, build};
mod sort;
