//! `apiVersion: builtin` transformer configs from a kustomization's `transformers:` list.
//!
//! A plugin config uses exactly the `fieldSpecs` it lists: kustomize's default tables are
//! not added. Configs are decoded as kustomize decodes them (see [`crate::gojson`]): unknown
//! fields are ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::namespace::{NamespaceOptions, RoleBindingSubjects};
use super::{
    TransformError, add_annotations, add_labels, add_name_prefix, add_name_suffix, set_image,
    set_namespace, set_replicas,
};
use crate::fieldspec::FieldSpec;
use crate::gojson::{self, Mode};
use crate::kustfile::{Image, Replica};
use crate::resource::{Object, ResMap};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LabelsConfig {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnnotationsConfig {
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
struct NamespaceMeta {
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NamespaceConfig {
    #[serde(default)]
    metadata: NamespaceMeta,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
    #[serde(default)]
    unset_only: bool,
    #[serde(default)]
    set_role_binding_subjects: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AffixConfig {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    suffix: String,
    /// `None` when absent, which kustomize rejects.
    #[serde(default)]
    field_specs: Option<Vec<FieldSpec>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ImageTagConfig {
    #[serde(default)]
    image_tag: Image,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ReplicaCountConfig {
    #[serde(default)]
    replica: Replica,
    #[serde(default)]
    field_specs: Vec<FieldSpec>,
}

/// Decodes a plugin config as kustomize does: unknown fields ignored, field names matched
/// case-insensitively, numbers given for strings taken as text.
fn parse<T: DeserializeOwned>(kind: &str, config: &Object) -> Result<T, TransformError> {
    gojson::from_value(&Value::Object(config.clone()), Mode::LENIENT).map_err(|e| {
        TransformError::Config {
            kind: kind.to_string(),
            reason: e.to_string(),
        }
    })
}

/// Runs the builtin transformer `kind` configured by `config` (the whole plugin object,
/// `apiVersion: builtin`). Handles `LabelTransformer`, `AnnotationsTransformer`,
/// `NamespaceTransformer`, `PrefixTransformer`, `SuffixTransformer`,
/// `PrefixSuffixTransformer`, `ImageTagTransformer` and `ReplicaCountTransformer`;
/// returns `Ok(false)` for any other kind without touching `resmap`.
pub fn apply_builtin(
    resmap: &mut ResMap,
    kind: &str,
    config: &Object,
) -> Result<bool, TransformError> {
    match kind {
        "LabelTransformer" => {
            let c: LabelsConfig = parse(kind, config)?;
            add_labels(resmap, &c.labels, &c.field_specs)?;
        }
        "AnnotationsTransformer" => {
            let c: AnnotationsConfig = parse(kind, config)?;
            add_annotations(resmap, &c.annotations, &c.field_specs)?;
        }
        "NamespaceTransformer" => {
            let c: NamespaceConfig = parse(kind, config)?;
            let role_binding_subjects = RoleBindingSubjects::parse(&c.set_role_binding_subjects)
                .ok_or_else(|| TransformError::Config {
                    kind: kind.to_string(),
                    reason: format!(
                        "invalid value {:?} for setRoleBindingSubjects: must be one of \
                         \"defaultOnly\", \"none\" or \"allServiceAccounts\"",
                        c.set_role_binding_subjects
                    ),
                })?;
            let options = NamespaceOptions {
                unset_only: c.unset_only,
                role_binding_subjects,
            };
            set_namespace(resmap, &c.metadata.namespace, &options, &c.field_specs)?;
        }
        "PrefixTransformer" | "SuffixTransformer" | "PrefixSuffixTransformer" => {
            let c: AffixConfig = parse(kind, config)?;
            let specs = c.field_specs.ok_or_else(|| TransformError::Config {
                kind: kind.to_string(),
                reason: "fieldSpecs is not expected to be nil".to_string(),
            })?;
            if kind != "SuffixTransformer" {
                add_name_prefix(resmap, &c.prefix, &specs)?;
            }
            if kind != "PrefixTransformer" {
                add_name_suffix(resmap, &c.suffix, &specs)?;
            }
        }
        "ImageTagTransformer" => {
            let c: ImageTagConfig = parse(kind, config)?;
            set_image(resmap, &c.image_tag, &c.field_specs)?;
        }
        "ReplicaCountTransformer" => {
            let c: ReplicaCountConfig = parse(kind, config)?;
            set_replicas(resmap, &c.replica, &c.field_specs)?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    fn config(value: Value) -> Object {
        match value {
            Value::Object(obj) => obj,
            _ => panic!("not a map"),
        }
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    #[test]
    fn namespace_plugin_sets_metadata_namespace() {
        let mut map = resmap(vec![json!({"apiVersion": "apps/v1", "kind": "ConfigMap",
            "metadata": {"name": "whatever"}, "data": {}})]);
        let cfg = config(
            json!({"apiVersion": "builtin", "kind": "NamespaceTransformer",
            "metadata": {"name": "x", "namespace": "test"},
            "fieldSpecs": [{"path": "metadata/namespace", "create": true}]}),
        );
        assert!(apply_builtin(&mut map, "NamespaceTransformer", &cfg).unwrap());
        assert_eq!(map.as_slice()[0].namespace(), "test");
    }

    #[test]
    fn namespace_plugin_rejects_bad_subject_mode() {
        let mut map = resmap(vec![]);
        let cfg = config(json!({"metadata": {"namespace": "t"}, "setRoleBindingSubjects": "some"}));
        let err = apply_builtin(&mut map, "NamespaceTransformer", &cfg).unwrap_err();
        assert!(err.to_string().contains("setRoleBindingSubjects"));
    }

    #[test]
    fn prefix_suffix_plugin_needs_field_specs() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "apple"}}),
        ]);
        let cfg = config(json!({"prefix": "baked-", "suffix": "-pie",
            "fieldSpecs": [{"path": "metadata/name"}]}));
        assert!(apply_builtin(&mut map, "PrefixSuffixTransformer", &cfg).unwrap());
        assert_eq!(map.as_slice()[0].name(), "baked-apple-pie");
        let missing = config(json!({"prefix": "x-"}));
        assert!(apply_builtin(&mut map, "PrefixTransformer", &missing).is_err());
        let only_suffix = config(json!({"prefix": "ignored-", "suffix": "-2",
            "fieldSpecs": [{"path": "metadata/name"}]}));
        apply_builtin(&mut map, "SuffixTransformer", &only_suffix).unwrap();
        assert_eq!(map.as_slice()[0].name(), "baked-apple-pie-2");
    }

    #[test]
    fn label_plugin_uses_only_its_field_specs() {
        let mut map = resmap(vec![deployment()]);
        let cfg = config(json!({"labels": {"a": "b"},
            "fieldSpecs": [{"path": "metadata/labels", "create": true}]}));
        apply_builtin(&mut map, "LabelTransformer", &cfg).unwrap();
        let obj = &map.as_slice()[0].obj;
        assert_eq!(obj["metadata"]["labels"], json!({"a": "b"}));
        assert!(obj["spec"].get("selector").is_none());
    }

    #[test]
    fn annotation_image_and_replica_plugins() {
        let mut map = resmap(vec![deployment()]);
        let anno = config(json!({"annotations": {"x": "y"},
            "fieldSpecs": [{"kind": "Deployment", "path": "spec/template/metadata/annotations", "create": true}]}));
        apply_builtin(&mut map, "AnnotationsTransformer", &anno).unwrap();
        let image = config(json!({"imageTag": {"name": "nginx", "newTag": "2"}, "fieldSpecs": []}));
        apply_builtin(&mut map, "ImageTagTransformer", &image).unwrap();
        let replicas = config(json!({"replica": {"name": "d", "count": 4},
            "fieldSpecs": [{"kind": "Deployment", "path": "spec/replicas", "create": true}]}));
        apply_builtin(&mut map, "ReplicaCountTransformer", &replicas).unwrap();
        let obj = &map.as_slice()[0].obj;
        assert_eq!(
            obj["spec"]["template"]["metadata"]["annotations"],
            json!({"x": "y"})
        );
        assert!(obj["metadata"].get("annotations").is_none());
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("nginx:2")
        );
        assert_eq!(obj["spec"]["replicas"], json!(4));
    }

    #[test]
    fn other_kinds_are_not_handled() {
        let mut map = resmap(vec![deployment()]);
        let before = map.clone();
        assert!(!apply_builtin(&mut map, "PatchTransformer", &Object::new()).unwrap());
        assert_eq!(map, before);
    }
}
