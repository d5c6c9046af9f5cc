//! Generation of the Kustomization CustomResourceDefinition from the Rust types.
//!
//! The checked-in `crds/` file is the output of [`crd_yaml`]; a test fails when it is stale.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use super::Kustomization;

/// Path of the generated CRD, relative to the repository root.
pub const CRD_FILE: &str = "crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml";

/// Error serialising the CRD.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise the Kustomization CRD to YAML: {0}")]
pub struct CrdError(#[from] serde_saphyr::SerializeError);

/// The Kustomization CRD, shaped like Flux's: the annotation that keeps a Kustomization
/// applying it from substituting variables in its schema, the `listKind`, and no
/// `nullable` markers, so that the API server prunes explicit `null`s as it does with
/// Flux's CRD instead of storing them.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Kustomization::crd();
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "kustomize.toolkit.fluxcd.io/substitute".into(),
            "disabled".into(),
        );
    crd.spec.names.list_kind = Some("KustomizationList".into());
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            strip_nullable(schema);
            add_object_fields(schema);
        }
    }
    crd
}

/// The root properties every object has, listed as Flux's CRD (controller-gen) lists them,
/// so that `kubectl explain kustomization` shows them as it does with Flux.
fn add_object_fields(root: &mut JSONSchemaProps) {
    let field = |type_: &str, description: Option<&str>| JSONSchemaProps {
        type_: Some(type_.into()),
        description: description.map(str::to_string),
        ..JSONSchemaProps::default()
    };
    let properties = root.properties.get_or_insert_with(Default::default);
    properties.insert(
        "apiVersion".into(),
        field(
            "string",
            Some(
                "APIVersion is the versioned schema of this object \
                 (kustomize.toolkit.fluxcd.io/v1).",
            ),
        ),
    );
    properties.insert(
        "kind".into(),
        field(
            "string",
            Some("Kind is the REST resource this object represents (Kustomization)."),
        ),
    );
    properties.insert("metadata".into(), field("object", None));
}

fn strip_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|props| props.values_mut())
        .chain(schema.items.iter_mut().filter_map(|items| match items {
            JSONSchemaPropsOrArray::Schema(schema) => Some(schema.as_mut()),
            JSONSchemaPropsOrArray::Schemas(_) => None,
        }))
        .chain(
            schema
                .additional_properties
                .iter_mut()
                .filter_map(|extra| match extra {
                    JSONSchemaPropsOrBool::Schema(schema) => Some(schema.as_mut()),
                    JSONSchemaPropsOrBool::Bool(_) => None,
                }),
        );
    for child in children {
        strip_nullable(child);
    }
}

/// The CRD as the YAML document written to [`CRD_FILE`].
pub fn crd_yaml() -> Result<String, CrdError> {
    Ok(format!("---\n{}", serde_saphyr::to_string(&crd())?))
}
