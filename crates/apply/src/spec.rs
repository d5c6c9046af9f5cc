//! The fields of a Kustomization the engine reads and writes, defined here once: the
//! controller's API types re-export them, so that their JSON and (with the `schemars`
//! feature) their CRD schema are the ones Flux's `kustomize.toolkit.fluxcd.io/v1` gives.

use serde::{Deserialize, Serialize};

/// Selector specifies a set of resources. Any resource that matches intersection of all
/// conditions is included in this set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Group is the API group to select resources from. Together with Version and Kind it
    /// is capable of unambiguously identifying and/or selecting resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Version of the API Group to select resources from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind of the API Group to select resources from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace to select resources from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name to match resources with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// AnnotationSelector is a string that follows the label selection expression
    /// https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#api It
    /// matches with the resource annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<String>,
    /// LabelSelector is a string that follows the label selection expression
    /// https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#api It
    /// matches with the resource labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// IgnoreRule defines a rule to selectively disregard specific changes during the drift
/// detection process.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct IgnoreRule {
    /// Paths is a list of JSON Pointer (RFC 6901) paths to be excluded from consideration in
    /// a Kubernetes object.
    pub paths: Vec<String>,
    /// Target is a selector for specifying Kubernetes objects to which this rule applies.
    /// If Target is not set, the Paths will be ignored for all Kubernetes objects within the
    /// manifest of the Helm release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// ResourceRef contains the information necessary to locate a resource within a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct ResourceRef {
    /// ID is the string representation of the Kubernetes resource object's metadata, in the
    /// format '<namespace>_<name>_<group>_<kind>'.
    pub id: String,
    /// Version is the API version of the Kubernetes resource object's kind.
    pub v: String,
}
