//! A drop-in replacement for Flux's kustomize-controller.
//!
//! The reconcile of one Kustomization is a straight pipeline:
//! source -> decrypt -> build -> substitute -> apply -> health -> prune -> status.
//! Each stage lives in its own module; the pure ones never touch the Kubernetes API.

pub mod api;
pub mod apply;
pub mod build;
pub mod client;
pub mod controller;
pub mod flags;
pub mod health;
pub mod http;
pub mod leader;
pub mod manifest;
pub mod metrics;
pub mod source;
pub mod telemetry;
