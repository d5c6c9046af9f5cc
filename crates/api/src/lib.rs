//! The Kustomization API (`kustomize.toolkit.fluxcd.io/v1`), the view of Flux's source kinds,
//! and every Flux-compatible name the controller writes.
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod condition;
pub mod crd;
pub mod duration;
pub mod kustomization;
pub mod names;
pub mod source;
pub mod validation;

pub use condition::{Condition, ConditionStatus};
pub use kustomization::{Kustomization, KustomizationSpec, KustomizationStatus, ResourceRef};
pub use source::Artifact;
