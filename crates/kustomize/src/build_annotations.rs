//! kustomize's build annotations as a JSON 6902 patch sees them.
//!
//! kustomize keeps a resource's history in `internal.config.kubernetes.io/...` annotations
//! while it builds, and removes them before printing. A JSON patch runs on the object with
//! them in place: its `patches:` transformer first records the current id there
//! (`previousNames`, `previousNamespaces`, `previousKinds`), so `metadata.annotations`
//! exists during the patch even on an object written without annotations, and
//! `add /metadata/annotations/<key>` succeeds (the same `add` under `labels` fails). This
//! engine keeps the history beside the object ([`Resource::prev_ids`]); this module writes
//! the three annotations for the length of a patch and takes them out again.

use serde_json::{Map, Value};

use crate::resource::{ResId, Resource};

/// Prefix of kustomize's build annotations.
const PREFIX: &str = "internal.config.kubernetes.io/";
/// The namespace kustomize records for a cluster-scoped kind.
const NOT_A_NAMESPACE: &str = "_non_namespaceable_";

/// How one previous-id annotation reads its value from an id.
type ReadId = fn(&ResId) -> String;

/// The previous-id annotations: key suffix and how a value is read from an id.
const PREVIOUS_ID: [(&str, ReadId); 3] = [
    ("previousNames", |id| id.name.clone()),
    ("previousNamespaces", previous_namespace),
    ("previousKinds", |id| id.gvk.kind.clone()),
];

fn previous_namespace(id: &ResId) -> String {
    if id.gvk.is_cluster_scoped() {
        NOT_A_NAMESPACE.to_string()
    } else {
        id.effective_namespace().to_string()
    }
}

/// Whether kustomize would hold build annotations on `resource` at this point: a recorded
/// previous id, a generator's behavior or hash suffix, or a name prefix or suffix.
pub fn has_build_annotations(resource: &Resource) -> bool {
    !resource.prev_ids.is_empty()
        || resource.needs_hash_suffix
        || resource.behavior != crate::resource::Behavior::Create
        || !resource.name_prefixes.is_empty()
        || !resource.name_suffixes.is_empty()
}

/// What [`insert_previous_ids`] did, for [`remove_previous_ids`] to undo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// Nothing: kustomize would hold no build annotations on the object.
    Nothing,
    /// Annotations were added to a map the object had.
    IntoExisting,
    /// The map was created (it was absent or null).
    CreatedMap,
}

/// Writes the previous-id annotations of `resource` into `metadata.annotations` (creating
/// the map when it is absent or null) when kustomize would have build annotations there.
pub fn insert_previous_ids(resource: &mut Resource) -> Inserted {
    if !has_build_annotations(resource) {
        return Inserted::Nothing;
    }
    let values: Vec<(String, String)> = PREVIOUS_ID
        .iter()
        .filter(|_| !resource.prev_ids.is_empty())
        .map(|(key, read)| {
            let csv: Vec<String> = resource.prev_ids.iter().map(read).collect();
            (format!("{PREFIX}{key}"), csv.join(","))
        })
        .collect();
    let metadata = resource.metadata_mut();
    let created = metadata.get("annotations").is_none_or(Value::is_null);
    if created {
        metadata.insert("annotations".into(), Value::Object(Map::new()));
    }
    let Some(Value::Object(map)) = metadata.get_mut("annotations") else {
        return Inserted::Nothing;
    };
    for (key, value) in values {
        map.insert(key, Value::String(value));
    }
    if created {
        Inserted::CreatedMap
    } else {
        Inserted::IntoExisting
    }
}

/// Takes out what [`insert_previous_ids`] wrote, and the map when it created it and the
/// patch left nothing else there (kustomize drops an empty map when it prints the object).
pub fn remove_previous_ids(resource: &mut Resource, inserted: Inserted) {
    if inserted == Inserted::Nothing {
        return;
    }
    let metadata = resource.metadata_mut();
    let Some(Value::Object(map)) = metadata.get_mut("annotations") else {
        return;
    };
    for (key, _) in PREVIOUS_ID {
        map.shift_remove(&format!("{PREFIX}{key}"));
    }
    if map.is_empty() && inserted == Inserted::CreatedMap {
        metadata.shift_remove("annotations");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource::test_resource as resource;

    #[test]
    fn a_recorded_id_makes_the_map_exist_and_leaves_no_trace() {
        let mut r = resource(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}
        }));
        r.remember_id();
        let inserted = insert_previous_ids(&mut r);
        assert_eq!(inserted, Inserted::CreatedMap);
        assert_eq!(
            r.obj["metadata"]["annotations"],
            json!({
                "internal.config.kubernetes.io/previousNames": "a",
                "internal.config.kubernetes.io/previousNamespaces": "default",
                "internal.config.kubernetes.io/previousKinds": "ConfigMap",
            })
        );
        remove_previous_ids(&mut r, inserted);
        assert_eq!(r.obj["metadata"], json!({"name": "a"}));
        // What a patch adds stays.
        let inserted = insert_previous_ids(&mut r);
        if let Some(Value::Object(map)) = r.obj["metadata"].get_mut("annotations") {
            map.insert("foo".into(), json!("bar"));
        }
        remove_previous_ids(&mut r, inserted);
        assert_eq!(
            r.obj["metadata"],
            json!({"name": "a", "annotations": {"foo": "bar"}})
        );
    }

    #[test]
    fn existing_annotations_keep_their_order() {
        let mut r = resource(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "annotations": {"z": "1"}}
        }));
        r.remember_id();
        let inserted = insert_previous_ids(&mut r);
        assert_eq!(inserted, Inserted::IntoExisting);
        assert_eq!(
            r.obj["metadata"]["annotations"]["internal.config.kubernetes.io/previousNamespaces"],
            json!("_non_namespaceable_")
        );
        if let Some(Value::Object(map)) = r.obj["metadata"].get_mut("annotations") {
            map.insert("foo".into(), json!("bar"));
        }
        remove_previous_ids(&mut r, inserted);
        assert_eq!(
            r.obj["metadata"]["annotations"],
            json!({"z": "1", "foo": "bar"})
        );
    }

    #[test]
    fn without_history_nothing_is_written() {
        let mut r = resource(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}
        }));
        assert_eq!(insert_previous_ids(&mut r), Inserted::Nothing);
        assert_eq!(r.obj["metadata"], json!({"name": "a"}));
        r.needs_hash_suffix = true;
        assert_eq!(insert_previous_ids(&mut r), Inserted::CreatedMap);
        assert_eq!(r.obj["metadata"]["annotations"], json!({}));
    }
}
