//! `commonLabels`, `labels:` entries and the `LabelTransformer` plugin.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Create, FieldSetError, TransformError, apply_spec, merge_specs};
use crate::config::TransformerConfig;
use crate::fieldspec::FieldSpec;
use crate::kustfile::Label;
use crate::resource::ResMap;

/// Sets `key: value` in a label or annotation map, making a `null` into a map. Values are
/// always strings.
pub(crate) fn set_map_entry(node: &mut Value, key: &str, value: &str) -> Result<(), FieldSetError> {
    if node.is_null() {
        *node = Value::Object(Map::new());
    }
    match node {
        Value::Object(map) => {
            map.insert(key.to_string(), Value::String(value.to_string()));
            Ok(())
        }
        _ => Err(FieldSetError::NotAMap),
    }
}

/// Sets each of `entries` at every map the field specs locate in every resource, creating
/// maps where a spec says so (the body of kustomize's label and annotation transformers).
pub(crate) fn add_map_entries(
    resmap: &mut ResMap,
    entries: &BTreeMap<String, String>,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    if entries.is_empty() {
        return Ok(());
    }
    for res in resmap.iter_mut() {
        for (key, value) in entries {
            for spec in field_specs {
                apply_spec(res, spec, Create::Map, &mut |node| {
                    set_map_entry(node, key, value)
                })?;
            }
        }
    }
    Ok(())
}

/// Adds `labels` at every field `field_specs` selects (kustomize's `LabelTransformer`).
/// Nothing happens when `labels` is empty.
pub fn add_labels(
    resmap: &mut ResMap,
    labels: &BTreeMap<String, String>,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    add_map_entries(resmap, labels, field_specs)
}

/// The field specs a `labels:` entry applies to: its own `fields`, the configuration's
/// `labels` table, then either every `commonLabels` spec (`includeSelectors`) or the
/// template and volume-claim-template tables it asks for plus `metadata/labels`.
pub fn label_entry_field_specs(
    label: &Label,
    config: &TransformerConfig,
) -> Result<Vec<FieldSpec>, TransformError> {
    let mut specs = Vec::new();
    merge_specs(&mut specs, &label.fields)?;
    merge_specs(&mut specs, &config.labels)?;
    if label.include_selectors {
        merge_specs(&mut specs, &config.common_labels)?;
        return Ok(specs);
    }
    if label.include_templates {
        // v5.8.1's template table holds the volume claim templates; an entry that writes
        // `includeVolumeClaimTemplates` gets v5.8.2's table without them.
        let templates: Vec<FieldSpec> = match label.include_volume_claim_templates {
            None => config.template_labels.clone(),
            Some(_) => config
                .template_labels
                .iter()
                .filter(|s| !config.volume_claim_template_labels.contains(s))
                .cloned()
                .collect(),
        };
        merge_specs(&mut specs, &templates)?;
    }
    if label.include_volume_claim_templates == Some(true) {
        merge_specs(&mut specs, &config.volume_claim_template_labels)?;
    }
    merge_specs(&mut specs, &[FieldSpec::any_kind("metadata/labels", true)])?;
    Ok(specs)
}

/// A kustomization's `labels:` entries, in order, then its `commonLabels` (with the
/// `commonLabels` table), as kustomize runs them.
pub fn apply_kustomization_labels(
    resmap: &mut ResMap,
    labels: &[Label],
    common_labels: &BTreeMap<String, String>,
    config: &TransformerConfig,
) -> Result<(), TransformError> {
    for label in labels {
        let specs = label_entry_field_specs(label, config)?;
        add_labels(resmap, &label.pairs, &specs)?;
    }
    add_labels(resmap, common_labels, &config.common_labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    fn pairs(items: &[(&str, &str)]) -> BTreeMap<String, String> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })
    }

    fn service() -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
               "spec": {"ports": [{"port": 80}]}})
    }

    fn statefulset() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}}]
            }
        })
    }

    #[test]
    fn common_labels_reach_selectors_and_templates_as_strings() {
        let mut map = resmap(vec![deployment(), service()]);
        let config = TransformerConfig::builtin();
        apply_kustomization_labels(&mut map, &[], &pairs(&[("version", "1")]), &config).unwrap();
        let dep = &map.as_slice()[0].obj;
        assert_eq!(dep["metadata"]["labels"], json!({"version": "1"}));
        assert_eq!(
            dep["spec"]["selector"]["matchLabels"],
            json!({"version": "1"})
        );
        assert_eq!(
            dep["spec"]["template"]["metadata"]["labels"],
            json!({"version": "1"})
        );
        let svc = &map.as_slice()[1].obj;
        assert_eq!(svc["spec"]["selector"], json!({"version": "1"}));
        assert!(svc["spec"].get("template").is_none());
    }

    #[test]
    fn label_entry_without_flags_only_touches_metadata() {
        let mut map = resmap(vec![deployment()]);
        let config = TransformerConfig::builtin();
        let label = Label {
            pairs: pairs(&[("team", "a")]),
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let dep = &map.as_slice()[0].obj;
        assert_eq!(dep["metadata"]["labels"], json!({"team": "a"}));
        assert!(dep["spec"].get("selector").is_none());
        assert!(dep["spec"]["template"].get("metadata").is_none());
    }

    #[test]
    fn include_templates_skips_selectors_but_reaches_claims() {
        let mut map = resmap(vec![deployment(), service(), statefulset()]);
        let config = TransformerConfig::builtin();
        let label = Label {
            pairs: pairs(&[("team", "a")]),
            include_templates: true,
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let dep = &map.as_slice()[0].obj;
        assert_eq!(
            dep["spec"]["template"]["metadata"]["labels"],
            json!({"team": "a"})
        );
        assert!(dep["spec"].get("selector").is_none());
        let svc = &map.as_slice()[1].obj;
        assert!(svc["spec"].get("selector").is_none());
        assert!(svc["spec"].get("template").is_none());
        let sts = &map.as_slice()[2].obj;
        assert_eq!(sts["spec"]["selector"]["matchLabels"], json!({"app": "db"}));
        // kustomize v5.8.1 (Flux v1.10.1) labels volume claim templates here; v5.8.2 does not.
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["metadata"],
            json!({"name": "data", "labels": {"team": "a"}})
        );
    }

    #[test]
    fn written_include_volume_claim_templates_false_keeps_claims_unlabeled() {
        // The field is v5.8.2's (v5.8.1 refuses it), so where it is written its meaning wins.
        let mut map = resmap(vec![statefulset()]);
        let config = TransformerConfig::builtin();
        let label = Label {
            pairs: pairs(&[("team", "a")]),
            include_templates: true,
            include_volume_claim_templates: Some(false),
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let sts = &map.as_slice()[0].obj;
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["metadata"],
            json!({"name": "data"})
        );
        assert_eq!(
            sts["spec"]["template"]["metadata"]["labels"]["team"],
            json!("a")
        );
    }

    #[test]
    fn include_volume_claim_templates_alone() {
        let mut map = resmap(vec![statefulset(), deployment()]);
        let config = TransformerConfig::builtin();
        let label = Label {
            pairs: pairs(&[("foo", "bar")]),
            include_volume_claim_templates: Some(true),
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let sts = &map.as_slice()[0].obj;
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"],
            json!({"foo": "bar"})
        );
        assert_eq!(
            sts["spec"]["template"]["metadata"]["labels"],
            json!({"app": "db"})
        );
        let dep = &map.as_slice()[1].obj;
        assert!(dep["spec"].get("volumeClaimTemplates").is_none());
    }

    #[test]
    fn include_selectors_reaches_claims_too() {
        let mut map = resmap(vec![statefulset()]);
        let config = TransformerConfig::builtin();
        let label = Label {
            pairs: pairs(&[("foo", "bar")]),
            include_selectors: true,
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let sts = &map.as_slice()[0].obj;
        assert_eq!(
            sts["spec"]["selector"]["matchLabels"],
            json!({"app": "db", "foo": "bar"})
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"],
            json!({"foo": "bar"})
        );
    }

    #[test]
    fn configuration_labels_table_and_entry_fields_apply() {
        let mut map = resmap(vec![json!({
            "apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"selector": {}}
        })]);
        let mut config = TransformerConfig::builtin();
        config.labels = vec![FieldSpec::for_kind("Thing", "spec/selector", true)];
        let label = Label {
            pairs: pairs(&[("a", "b")]),
            fields: vec![FieldSpec::for_kind("Thing", "spec/extra", true)],
            ..Label::default()
        };
        apply_kustomization_labels(&mut map, &[label], &BTreeMap::new(), &config).unwrap();
        let obj = &map.as_slice()[0].obj;
        assert_eq!(obj["spec"]["selector"], json!({"a": "b"}));
        assert_eq!(obj["spec"]["extra"], json!({"a": "b"}));
        assert_eq!(obj["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn non_map_label_field_is_an_error() {
        let mut map = resmap(vec![json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": "x"}
        })]);
        let err = add_labels(
            &mut map,
            &pairs(&[("a", "b")]),
            &[FieldSpec::any_kind("metadata/labels", true)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("metadata/labels") && err.contains("ConfigMap"),
            "{err}"
        );
    }

    #[test]
    fn null_labels_become_a_map() {
        let mut map = resmap(vec![json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": null}
        })]);
        add_labels(
            &mut map,
            &pairs(&[("a", "b")]),
            &[FieldSpec::any_kind("metadata/labels", true)],
        )
        .unwrap();
        assert_eq!(
            map.as_slice()[0].obj["metadata"]["labels"],
            json!({"a": "b"})
        );
    }
}
