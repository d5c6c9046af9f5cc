//! `replicas:` entries and the `ReplicaCountTransformer` plugin.

use serde_json::Value;

use super::{Create, TransformError, apply_spec};
use crate::fieldspec::FieldSpec;
use crate::kustfile::Replica;
use crate::resource::ResMap;

/// Applies one `replicas` entry (kustomize's `ReplicaCountTransformer`): for each field
/// spec, every resource whose current or any earlier id has the entry's name and a kind
/// the spec selects gets the count at the spec's path. No match for any spec is an error.
pub fn set_replicas(
    resmap: &mut ResMap,
    replica: &Replica,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    let mut found = false;
    for spec in field_specs {
        let selector = spec.gvk();
        for res in resmap.iter_mut() {
            let matched = res
                .all_ids()
                .any(|id| id.name == replica.name && selector.selects(&id.gvk));
            if !matched {
                continue;
            }
            found = true;
            apply_spec(res, spec, Create::Scalar, &mut |node| {
                *node = Value::from(replica.count);
                Ok(())
            })?;
        }
    }
    if found {
        return Ok(());
    }
    let gvks: Vec<String> = field_specs.iter().map(describe_selector).collect();
    Err(TransformError::ReplicaTargetNotFound {
        name: replica.name.clone(),
        gvks: gvks.join(" "),
    })
}

/// Applies every `replicas` entry in order.
pub fn set_all_replicas(
    resmap: &mut ResMap,
    replicas: &[Replica],
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    replicas
        .iter()
        .try_for_each(|replica| set_replicas(resmap, replica, field_specs))
}

/// A field spec's kind selector as kustomize prints a GVK (`~G`/`~V` for empty parts).
fn describe_selector(spec: &FieldSpec) -> String {
    crate::sort::legacy_gvk_text(&spec.group, &spec.version, &spec.kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransformerConfig;

    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    fn replica(name: &str, count: i64) -> Replica {
        Replica {
            name: name.to_string(),
            count,
        }
    }

    #[test]
    fn sets_count_by_current_or_original_name() {
        let mut map = resmap(vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}}),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}),
        ]);
        map.as_mut_vec()[1].set_name("prefix-db");
        let specs = TransformerConfig::builtin().replicas;
        set_replicas(&mut map, &replica("web", 3), &specs).unwrap();
        set_replicas(&mut map, &replica("db", 0), &specs).unwrap();
        let res = map.as_slice();
        assert_eq!(res[0].obj["spec"]["replicas"], json!(3));
        assert_eq!(res[1].obj["spec"]["replicas"], json!(0));
        assert!(res[2].obj.get("spec").is_none());
    }

    #[test]
    fn unknown_name_is_an_error_listing_kinds() {
        let mut map = resmap(vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
        ]);
        let specs = [FieldSpec::for_kind("Deployment", "spec/replicas", true)];
        let err = set_replicas(&mut map, &replica("nope", 2), &specs)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nope") && err.contains("~G_~V_Deployment"),
            "{err}"
        );
    }

    #[test]
    fn without_create_a_missing_field_stays_missing() {
        let mut map = resmap(vec![
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {}}),
        ]);
        let specs = [FieldSpec::for_kind("Thing", "spec/size", false)];
        set_replicas(&mut map, &replica("t", 2), &specs).unwrap();
        assert_eq!(map.as_slice()[0].obj["spec"], json!({}));
    }
}
