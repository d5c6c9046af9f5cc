//! The field of a Kustomization the CEL engine reads, defined here once: the controller's API
//! types re-export it, so that its JSON and (with the `schemars` feature) its CRD schema are
//! the ones Flux's `kustomize.toolkit.fluxcd.io/v1` gives.

use serde::{Deserialize, Serialize};

/// CustomHealthCheck defines the health check for custom resources, as CEL expressions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CustomHealthCheck {
    /// APIVersion of the custom resource under evaluation.
    pub api_version: String,
    /// Kind of the custom resource under evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Current is the CEL expression that determines if the status of the custom resource
    /// has reached the desired state.
    pub current: String,
    /// InProgress is the CEL expression that determines if the status of the custom
    /// resource has not yet reached the desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
    /// Failed is the CEL expression that determines if the status of the custom resource
    /// has failed to reach the desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}
