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
pub enum CrdError {
    /// The YAML serialiser failed.
    #[error("failed to serialise the Kustomization CRD to YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// The CRD could not be turned into JSON values.
    #[error("failed to serialise the Kustomization CRD: {0}")]
    Json(#[from] serde_json::Error),
}

/// The Kustomization CRD, shaped like Flux's: the annotation that keeps a Kustomization
/// applying it from substituting variables in its schema, the `listKind`, no `nullable`
/// markers, so that the API server prunes explicit `null`s as it does with Flux's CRD
/// instead of storing them, and a root that neither requires `spec` nor has a `title`.
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
            // schemars titles the root after the type and requires every field without a
            // default; Flux's root has no title and requires nothing (the Rust type reads a
            // missing spec as the default one).
            schema.title = None;
            if let Some(required) = schema.required.as_mut() {
                required.retain(|field| field != "spec");
            }
            if schema.required.as_ref().is_some_and(Vec::is_empty) {
                schema.required = None;
            }
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

/// The schema keywords k8s-openapi holds as `f64`.
const NUMBER_KEYWORDS: [&str; 3] = ["minimum", "maximum", "multipleOf"];

/// Writes integral bounds as integers (`minimum: 0`), as controller-gen writes Flux's CRD;
/// k8s-openapi holds them as `f64`, which would print as `0.0`.
fn integral_bounds(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let integral = child
                    .as_f64()
                    .filter(|n| n.fract() == 0.0 && n.abs() < 9.0e15);
                match integral {
                    // In range and whole, so the conversion is exact.
                    Some(n) if NUMBER_KEYWORDS.contains(&key.as_str()) => {
                        *child = serde_json::Value::from(n as i64)
                    }
                    _ => integral_bounds(child),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_bounds),
        _ => {}
    }
}

/// The CRD as the YAML document written to [`CRD_FILE`].
pub fn crd_yaml() -> Result<String, CrdError> {
    let mut value = serde_json::to_value(crd())?;
    integral_bounds(&mut value);
    Ok(format!("---\n{}", serde_saphyr::to_string(&value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_bounds_print_as_integers() {
        let mut value = serde_json::json!({
            "properties": {
                "count": {"type": "integer", "minimum": 0.0, "maximum": 10.0},
                "ratio": {"type": "number", "minimum": 0.5},
                "minimum": {"type": "string", "default": 1.0},
            },
        });
        integral_bounds(&mut value);
        let count = &value["properties"]["count"];
        assert!(count["minimum"].is_i64() && count["maximum"].is_i64());
        assert_eq!(
            value["properties"]["ratio"]["minimum"],
            serde_json::json!(0.5)
        );
        // A property named like a keyword is a schema, and a default is not a bound.
        assert!(value["properties"]["minimum"]["default"].is_f64());
    }

    #[test]
    fn the_root_requires_nothing_and_has_no_title() {
        let crd = crd();
        let root = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("a schema");
        assert_eq!(root.required, None);
        assert_eq!(root.title, None);
        let yaml = crd_yaml().expect("YAML");
        assert!(yaml.contains("minimum: 0\n") && !yaml.contains("minimum: 0.0"));
    }
}
