//! A drop-in replacement for Flux's kustomize-controller.
//!
//! The reconcile of one Kustomization is a straight pipeline:
//! source -> decrypt -> build -> substitute -> apply -> health -> prune -> status.
//! The source stage is the `artifact` crate (download, digest verification, safe extraction,
//! one shared extraction per digest). The pure stages are crates of their own, with no
//! Kubernetes client: `kustomize` (the kustomize engine), `sops` (decryption), `envsubst`
//! (post-build variables), all on the `goyaml` crate. The apply engine (`apply`: staged server-side apply, prune, kstatus, the
//! watch-driven health wait) and Flux's CEL expressions (`fluxcel`) are crates too.
//! [`render`] joins them the way Flux does: it is the build stage of the pipeline (Flux's
//! generated kustomization, the spec's overlay fields, decryption around the build,
//! substitution and `commonMetadata` after it).

pub mod client;
pub mod cluster;
pub mod controller;
pub mod diff;
pub mod flags;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod spiffe;
pub mod telemetry;
pub mod tls;

// The Kustomization API is a crate of its own (Flux ships it as a separate Go module); the
// controller's modules and its tests name it `crate::api` / `kustomize_controller::api`.
pub use api;
// So is the render pipeline, which the controller, `diff` and the offline `build` call.
pub use render;
