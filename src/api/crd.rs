//! Generation of the Kustomization CustomResourceDefinition from the Rust types.
//!
//! The checked-in `crds/` file is the output of [`crd_yaml`]; a test fails when it is stale.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::Kustomization;

/// Path of the generated CRD, relative to the repository root.
pub const CRD_FILE: &str = "crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml";

/// Error serialising the CRD.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise the Kustomization CRD to YAML: {0}")]
pub struct CrdError(#[from] serde_saphyr::SerializeError);

/// The Kustomization CRD, with the annotation Flux sets so that a Kustomization that
/// applies it never substitutes variables inside its schema.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Kustomization::crd();
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "kustomize.toolkit.fluxcd.io/substitute".into(),
            "disabled".into(),
        );
    crd
}

/// The CRD as the YAML document written to [`CRD_FILE`].
pub fn crd_yaml() -> Result<String, CrdError> {
    Ok(format!("---\n{}", serde_saphyr::to_string(&crd())?))
}
