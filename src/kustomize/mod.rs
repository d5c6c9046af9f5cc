//! The native kustomize engine: turns a directory holding a kustomization into the list of
//! objects `kustomize build` produces (kustomize v5.8 semantics, FIFO order).
//!
//! Pure: files in, objects out. No Kubernetes client, no global state; builds may run in
//! parallel.

pub mod config;
mod config_defaults;
pub mod fieldspec;
pub mod kustfile;
pub mod loader;
pub mod namereference;
pub mod replacements;
pub mod resource;
pub mod selector;
pub mod yaml;
