//! A drop-in replacement for Flux's kustomize-controller.
//!
//! The reconcile of one Kustomization is a straight pipeline:
//! source -> decrypt -> build -> substitute -> apply -> health -> prune -> status.
//! Each stage lives in its own module; the pure ones never touch the Kubernetes API.

pub mod source;
pub mod api;
pub mod flags;
pub mod manifest;
pub mod telemetry;
pub mod controller;
