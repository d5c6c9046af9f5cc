//! `commonAnnotations` and the `AnnotationsTransformer` plugin.

use std::collections::BTreeMap;

use super::TransformError;
use super::labels::add_map_entries;
use crate::fieldspec::FieldSpec;
use crate::resource::ResMap;

/// Adds `annotations` at every field `field_specs` selects (kustomize's
/// `AnnotationsTransformer`; `commonAnnotations` uses the `commonAnnotations` table).
/// Nothing happens when `annotations` is empty.
pub fn add_annotations(
    resmap: &mut ResMap,
    annotations: &BTreeMap<String, String>,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    add_map_entries(resmap, annotations, field_specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransformerConfig;

    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    #[test]
    fn common_annotations_reach_pod_and_job_templates() {
        let mut map = resmap(vec![
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
                   "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s",
                   "annotations": {"keep": "me"}}}),
        ]);
        let annotations: BTreeMap<String, String> =
            [("note".to_string(), "true".to_string())].into();
        add_annotations(
            &mut map,
            &annotations,
            &TransformerConfig::builtin().common_annotations,
        )
        .unwrap();
        let cj = &map.as_slice()[0].obj;
        assert_eq!(cj["metadata"]["annotations"], json!({"note": "true"}));
        assert_eq!(
            cj["spec"]["jobTemplate"]["metadata"]["annotations"],
            json!({"note": "true"})
        );
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"],
            json!({"note": "true"})
        );
        let svc = &map.as_slice()[1].obj;
        assert_eq!(
            svc["metadata"]["annotations"],
            json!({"keep": "me", "note": "true"})
        );
        assert!(svc.get("spec").is_none());
    }

    #[test]
    fn empty_annotations_change_nothing() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}),
        ]);
        let before = map.clone();
        add_annotations(
            &mut map,
            &BTreeMap::new(),
            &[FieldSpec::any_kind("metadata/annotations", true)],
        )
        .unwrap();
        assert_eq!(map, before);
    }
}
