//! JSON patches that rewrite a live object's metadata before it is applied, as Flux's
//! controller does: field managers taken over, stale annotations and labels removed, managed
//! field entries migrated to the applied API version.
//!
//! Everything here is pure: it reads the live object and returns the patch operations.

use serde_json::{Map, Value, json};

use super::names::KUBECTL_LAST_APPLIED_ANNOTATION;

/// An operation type of a `metadata.managedFields` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// A field manager whose ownership is taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldManager {
    /// The manager's name, or its prefix unless `exact`.
    pub name: String,
    /// The operation of the entries to take over.
    pub operation: Operation,
    /// Match the name exactly rather than as a prefix.
    pub exact: bool,
}

impl FieldManager {
    /// A manager matched by name prefix, as Flux's post-dry-run cleanup matches them.
    pub fn prefix(name: &str, operation: Operation) -> Self {
        FieldManager {
            name: name.to_string(),
            operation,
            exact: false,
        }
    }

    /// A manager matched by exact name (`--override-manager-before-dry-run`).
    pub fn exact(name: &str, operation: Operation) -> Self {
        FieldManager {
            name: name.to_string(),
            operation,
            exact: true,
        }
    }

    /// Whether `entry` (one of an object's `metadata.managedFields`) is this manager's.
    pub fn matches(&self, entry: &Value) -> bool {
        let field = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or("");
        if field("operation") != self.operation.as_str() || !field("subresource").is_empty() {
            return false;
        }
        let manager = field("manager");
        if self.exact {
            manager == self.name
        } else {
            manager.starts_with(&self.name)
        }
    }
}

/// The managers Flux's controller takes fields over from after the dry-run: `kubectl`
/// (server-side with `--force-conflicts`, and every client-side kubectl write),
/// `before-first-apply`, the controller's own pre-SSA updates, and each
/// `--override-manager` for both operations.
pub fn cleanup_managers(field_manager: &str, override_managers: &[String]) -> Vec<FieldManager> {
    let mut managers = vec![
        FieldManager::prefix("kubectl", Operation::Apply),
        FieldManager::prefix("kubectl", Operation::Update),
        FieldManager::prefix("before-first-apply", Operation::Update),
        FieldManager::prefix(field_manager, Operation::Update),
    ];
    for name in override_managers {
        managers.push(FieldManager::prefix(name, Operation::Apply));
        managers.push(FieldManager::prefix(name, Operation::Update));
    }
    managers
}

/// The managers taken over before the dry-run (`--override-manager-before-dry-run`): exact
/// names, both operations.
pub fn before_dry_run_managers(names: &[String]) -> Vec<FieldManager> {
    names
        .iter()
        .flat_map(|name| {
            [
                FieldManager::exact(name, Operation::Apply),
                FieldManager::exact(name, Operation::Update),
            ]
        })
        .collect()
}

/// Annotations removed from live objects: kubectl's last applied configuration and the
/// checksums of Flux v1.
pub const CLEANUP_ANNOTATIONS: [&str; 3] = [
    KUBECTL_LAST_APPLIED_ANNOTATION,
    "kustomize.toolkit.fluxcd.io/checksum",
    "fluxcd.io/sync-checksum",
];

/// Labels removed from live objects: Flux v1's garbage collection mark.
pub const CLEANUP_LABELS: [&str; 1] = ["fluxcd.io/sync-gc-mark"];

/// Operations that remove the cleanup annotations and labels present on `live`.
pub fn remove_stale_metadata(live: &Value) -> Vec<Value> {
    let present = |field: &str, key: &str| {
        live.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .is_some_and(|map| map.contains_key(key))
    };
    let mut operations = Vec::new();
    for (field, keys) in [
        ("annotations", &CLEANUP_ANNOTATIONS[..]),
        ("labels", &CLEANUP_LABELS[..]),
    ] {
        for key in keys.iter().filter(|key| present(field, key)) {
            operations.push(json!({
                "op": "remove",
                "path": format!("/metadata/{field}/{}", escape_pointer_token(key)),
            }));
        }
    }
    operations
}

/// The operation that gives `field_manager` (as an Apply entry) every field owned by an
/// entry matching one of `managers`: the first match is renamed when `field_manager` has no
/// Apply entry yet, the others are merged into it and dropped. None when nothing matches.
pub fn take_over(live: &Value, managers: &[FieldManager], field_manager: &str) -> Option<Value> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    let is_ours = |entry: &Value| {
        entry.get("manager").and_then(Value::as_str) == Some(field_manager)
            && entry.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let ours_index = entries.iter().rposition(is_ours);
    let mut ours: Option<Value> = ours_index.map(|i| entries[i].clone());
    let mut kept = Vec::with_capacity(entries.len());
    let mut edited = false;
    for (index, entry) in entries.iter().enumerate() {
        if Some(index) == ours_index {
            continue;
        }
        if managers.iter().any(|m| m.matches(entry)) {
            edited = true;
            match ours.as_mut() {
                None => {
                    let mut renamed = entry.clone();
                    if let Some(map) = renamed.as_object_mut() {
                        map.insert("manager".into(), Value::from(field_manager));
                        map.insert("operation".into(), Value::from("Apply"));
                    }
                    ours = Some(renamed);
                }
                Some(ours) => merge_fields(ours, entry.get("fieldsV1")),
            }
            continue;
        }
        kept.push(entry.clone());
    }
    if !edited {
        return None;
    }
    kept.extend(ours);
    Some(json!({"op": "replace", "path": "/metadata/managedFields", "value": kept}))
}

/// The operation that rewrites every managed fields entry to `api_version`, when one differs
/// (feature gate `MigrateAPIVersion`).
pub fn migrate_api_version(live: &Value, api_version: &str) -> Option<Value> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    let stale =
        |entry: &Value| entry.get("apiVersion").and_then(Value::as_str) != Some(api_version);
    if !entries.iter().any(stale) {
        return None;
    }
    let migrated: Vec<Value> = entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            if let Some(map) = entry.as_object_mut() {
                map.insert("apiVersion".into(), Value::from(api_version));
            }
            entry
        })
        .collect();
    Some(json!({"op": "replace", "path": "/metadata/managedFields", "value": migrated}))
}

/// The `fieldsV1` set of the Apply entry of `field_manager`, if it has one.
pub fn owned_fields<'a>(object: &'a Value, field_manager: &str) -> Option<&'a Value> {
    object
        .pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|entry| {
            entry.get("manager").and_then(Value::as_str) == Some(field_manager)
                && entry.get("operation").and_then(Value::as_str) == Some("Apply")
                && entry
                    .get("subresource")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
        })
        .and_then(|entry| entry.get("fieldsV1"))
}

/// Adds the fields of `other` to the `fieldsV1` of `entry` (a union of the two field sets).
fn merge_fields(entry: &mut Value, other: Option<&Value>) {
    let Some(other) = other else { return };
    let Some(map) = entry.as_object_mut() else {
        return;
    };
    match map.get_mut("fieldsV1") {
        Some(fields) => union(fields, other),
        None => {
            map.insert("fieldsV1".into(), other.clone());
        }
    }
}

/// `fieldsV1` is a trie of JSON objects: the union of two sets merges them key by key.
fn union(into: &mut Value, other: &Value) {
    let (Some(into), Some(other)) = (into.as_object_mut(), other.as_object()) else {
        return;
    };
    for (key, value) in other {
        match into.get_mut(key) {
            Some(existing) => union(existing, value),
            None => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// RFC 6901 escaping of one reference token.
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Whether `object` carries `key: value` (case-insensitive value) as an annotation or label.
pub fn has_switch(object: &Value, key: &str, value: &str) -> bool {
    ["annotations", "labels"].iter().any(|field| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .and_then(|map: &Map<String, Value>| map.get(key))
            .and_then(Value::as_str)
            .is_some_and(|v| v.eq_ignore_ascii_case(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "v1",
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn live(entries: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "a", "managedFields": entries}})
    }

    /// The take-over patch of the controller's field manager with the default cleanup managers.
    fn take_over_as_flux(object: &Value) -> Option<Value> {
        take_over(
            object,
            &cleanup_managers("kustomize-controller", &[]),
            "kustomize-controller",
        )
    }

    #[test]
    fn kubectl_client_side_fields_are_renamed_when_we_own_nothing() {
        let object = live(vec![entry(
            "kubectl-client-side-apply",
            "Update",
            json!({"f:data": {"f:a": {}, "f:b": {}}}),
        )]);
        let patch = take_over_as_flux(&object).expect("a patch");
        assert_eq!(
            patch,
            json!({"op": "replace", "path": "/metadata/managedFields", "value": [
                entry("kustomize-controller", "Apply", json!({"f:data": {"f:a": {}, "f:b": {}}}))
            ]})
        );
    }

    #[test]
    fn matching_managers_are_merged_into_ours_and_others_kept_in_order() {
        let object = live(vec![
            entry(
                "kustomize-controller",
                "Apply",
                json!({"f:data": {"f:a": {}}}),
            ),
            entry("hpa", "Apply", json!({"f:data": {"f:h": {}}})),
            entry("kubectl-edit", "Update", json!({"f:data": {"f:b": {}}})),
            entry(
                "kubectl",
                "Apply",
                json!({"f:metadata": {"f:labels": {"f:x": {}}}}),
            ),
        ]);
        let patch = take_over_as_flux(&object).expect("a patch");
        assert_eq!(
            patch["value"],
            json!([
                entry("hpa", "Apply", json!({"f:data": {"f:h": {}}})),
                entry(
                    "kustomize-controller",
                    "Apply",
                    json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
                ),
            ])
        );
    }

    #[test]
    fn our_entry_after_a_matching_one_is_merged_once() {
        let object = live(vec![
            entry("kubectl-edit", "Update", json!({"f:data": {"f:b": {}}})),
            entry(
                "kustomize-controller",
                "Apply",
                json!({"f:data": {"f:a": {}}}),
            ),
        ]);
        let patch = take_over_as_flux(&object).expect("a patch");
        assert_eq!(
            patch["value"],
            json!([entry(
                "kustomize-controller",
                "Apply",
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            )])
        );
    }

    #[test]
    fn nothing_to_take_over_gives_no_patch() {
        let object = live(vec![
            entry("kustomize-controller", "Apply", json!({"f:data": {}})),
            entry("kube-controller-manager", "Update", json!({"f:status": {}})),
        ]);
        assert_eq!(take_over_as_flux(&object), None);
    }

    #[test]
    fn exact_managers_do_not_match_by_prefix_and_subresources_are_left_alone() {
        let object = live(vec![
            entry("legacy-controller-v2", "Update", json!({"f:data": {}})),
            json!({"manager": "legacy", "operation": "Update", "subresource": "status",
                   "fieldsV1": {"f:status": {}}}),
        ]);
        let managers = before_dry_run_managers(&["legacy".to_string()]);
        assert_eq!(take_over(&object, &managers, "kustomize-controller"), None);
        let prefixed = cleanup_managers("kustomize-controller", &["legacy".to_string()]);
        assert!(take_over(&object, &prefixed, "kustomize-controller").is_some());
    }

    #[test]
    fn stale_annotations_and_labels_are_removed_with_escaped_paths() {
        let object = json!({"metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"},
            "labels": {"fluxcd.io/sync-gc-mark": "x"}}});
        assert_eq!(
            remove_stale_metadata(&object),
            vec![
                json!({"op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"}),
                json!({"op": "remove", "path": "/metadata/labels/fluxcd.io~1sync-gc-mark"}),
            ]
        );
        assert!(remove_stale_metadata(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn migration_rewrites_every_entry_only_when_one_differs() {
        let object = json!({"metadata": {"managedFields": [
            {"manager": "a", "apiVersion": "example.com/v1beta1"},
            {"manager": "b", "apiVersion": "example.com/v1"}]}});
        let patch = migrate_api_version(&object, "example.com/v1").expect("a patch");
        assert_eq!(
            patch["value"],
            json!([{"manager": "a", "apiVersion": "example.com/v1"},
                   {"manager": "b", "apiVersion": "example.com/v1"}])
        );
        assert_eq!(
            migrate_api_version(&patch_value(&patch), "example.com/v1"),
            None
        );
    }

    fn patch_value(patch: &Value) -> Value {
        json!({"metadata": {"managedFields": patch["value"].clone()}})
    }

    #[test]
    fn switches_are_read_from_labels_and_annotations_case_insensitively() {
        let object = json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/ssa": "Merge"}}});
        assert!(has_switch(
            &object,
            "kustomize.toolkit.fluxcd.io/ssa",
            "merge"
        ));
        assert!(!has_switch(
            &object,
            "kustomize.toolkit.fluxcd.io/ssa",
            "ignore"
        ));
    }
}
