//! Who wrote a managed object last, told from its `managedFields` alone, and whether that
//! write touched only fields a Kustomization leaves to others (`spec.ignore`): what a watch of
//! object metadata needs to tell drift from the controller's own applies and from status
//! updates.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::{Map, Value};

/// The last write to an object, by the newest of its `managedFields` entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LastWrite {
    /// By `field_manager` itself (its apply).
    Own,
    /// By `field_manager` and another manager within the same second (times have a precision
    /// of one second): which came last is told by the `resourceVersion` the controller
    /// recorded after its apply.
    Tied {
        /// The other manager's name.
        manager: String,
        /// The fields it owns.
        fields: Value,
    },
    /// A status update (the `status` subresource), which is not drift.
    Status,
    /// By another manager: drift.
    Other {
        /// The manager's name (`kubectl-edit`, `kube-controller-manager`, ...).
        manager: String,
        /// The fields it owns (its `fieldsV1` set).
        fields: Value,
    },
    /// The entries do not tell (none, or without times).
    Unknown,
}

/// Who wrote an object last, from its `managedFields`. Times have a precision of one second:
/// entries sharing the newest time are a status update if one of them is, and
/// [`LastWrite::Tied`] when `field_manager`'s is among them with another manager's.
pub fn last_write(entries: &[ManagedFieldsEntry], field_manager: &str) -> LastWrite {
    let Some(newest) = entries.iter().filter_map(|e| e.time.as_ref()).max() else {
        return LastWrite::Unknown;
    };
    let latest: Vec<&ManagedFieldsEntry> = entries
        .iter()
        .filter(|e| e.time.as_ref() == Some(newest))
        .collect();
    if latest
        .iter()
        .any(|e| e.subresource.as_deref() == Some("status"))
    {
        return LastWrite::Status;
    }
    let own = latest
        .iter()
        .any(|e| e.manager.as_deref() == Some(field_manager));
    let other = latest
        .iter()
        .find(|e| e.manager.as_deref() != Some(field_manager));
    let fields = |entry: &ManagedFieldsEntry| {
        entry
            .fields_v1
            .as_ref()
            .map(|f| f.0.clone())
            .unwrap_or(Value::Null)
    };
    match (own, other) {
        (true, None) => LastWrite::Own,
        (true, Some(entry)) => LastWrite::Tied {
            manager: entry.manager.clone().unwrap_or_default(),
            fields: fields(entry),
        },
        (false, Some(entry)) => LastWrite::Other {
            manager: entry.manager.clone().unwrap_or_default(),
            fields: fields(entry),
        },
        (false, None) => LastWrite::Unknown,
    }
}

/// Whether every field of the `fieldsV1` set `fields` lies under one of the JSON pointers
/// `ignored` (the `spec.ignore` paths that apply to the object). A pointer with an array
/// index cannot be matched without the object, and covers nothing here.
pub fn only_ignored(fields: &Value, ignored: &[String]) -> bool {
    let prefixes: Vec<Vec<String>> = ignored.iter().filter_map(|p| segments(p)).collect();
    let mut leaves = Vec::new();
    if let Some(fields) = fields.as_object() {
        collect_leaves(fields, &mut Vec::new(), &mut leaves);
    }
    !leaves.is_empty()
        && leaves.iter().all(|leaf| {
            prefixes
                .iter()
                .any(|prefix| leaf.len() >= prefix.len() && leaf[..prefix.len()] == prefix[..])
        })
}

/// `fieldsV1` keys of a JSON pointer of object fields: `/spec/replicas` is
/// `[f:spec, f:replicas]`. `None` for the empty pointer and for one with an array index.
fn segments(pointer: &str) -> Option<Vec<String>> {
    let raw = pointer.strip_prefix('/')?;
    if raw.is_empty() {
        return None;
    }
    raw.split('/')
        .map(|token| {
            let token = token.replace("~1", "/").replace("~0", "~");
            (token.parse::<u64>().is_err()).then(|| format!("f:{token}"))
        })
        .collect()
}

/// The paths of the leaves of a `fieldsV1` trie: a key whose set is empty, or that holds
/// `.` (the field itself, as of a list item).
fn collect_leaves(node: &Map<String, Value>, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, child) in node {
        if key == "." {
            out.push(path.clone());
            continue;
        }
        path.push(key.clone());
        match child.as_object() {
            Some(children) if !children.is_empty() => collect_leaves(children, path, out),
            _ => out.push(path.clone()),
        }
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, Time};
    use serde_json::json;

    fn entry(
        manager: &str,
        subresource: Option<&str>,
        second: i64,
        fields: Value,
    ) -> ManagedFieldsEntry {
        let time =
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + second).expect("a time");
        ManagedFieldsEntry {
            manager: Some(manager.to_string()),
            operation: Some("Update".to_string()),
            subresource: subresource.map(str::to_string),
            time: Some(Time(time)),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn the_newest_entry_tells_who_wrote_last() {
        let own = entry(
            "kustomize-controller",
            None,
            0,
            json!({"f:data": {"f:a": {}}}),
        );
        let edit = entry("kubectl-edit", None, 5, json!({"f:data": {"f:a": {}}}));
        let status = entry(
            "kube-controller-manager",
            Some("status"),
            9,
            json!({"f:status": {}}),
        );
        assert_eq!(
            last_write(&[own.clone(), edit.clone()], "kustomize-controller"),
            LastWrite::Other {
                manager: "kubectl-edit".into(),
                fields: json!({"f:data": {"f:a": {}}})
            }
        );
        assert_eq!(
            last_write(&[own.clone(), edit.clone(), status], "kustomize-controller"),
            LastWrite::Status
        );
        let reverted = entry(
            "kustomize-controller",
            None,
            7,
            json!({"f:data": {"f:a": {}}}),
        );
        assert_eq!(
            last_write(&[reverted, edit.clone()], "kustomize-controller"),
            LastWrite::Own
        );
        // The same second as the controller's own write: the recorded version tells.
        let same_second = entry("kustomize-controller", None, 5, json!({}));
        assert_eq!(
            last_write(&[same_second, edit], "kustomize-controller"),
            LastWrite::Tied {
                manager: "kubectl-edit".into(),
                fields: json!({"f:data": {"f:a": {}}})
            }
        );
        assert_eq!(last_write(&[], "kustomize-controller"), LastWrite::Unknown);
    }

    #[test]
    fn a_write_is_ignored_only_when_every_field_it_owns_is() {
        let replicas = json!({"f:spec": {"f:replicas": {}}});
        let ignored = ["/spec/replicas".to_string()];
        assert!(only_ignored(&replicas, &ignored));
        assert!(only_ignored(&replicas, &["/spec".to_string()]));
        let more = json!({"f:spec": {"f:replicas": {}, "f:paused": {}}});
        assert!(!only_ignored(&more, &ignored));
        assert!(!only_ignored(&replicas, &[]));
        assert!(!only_ignored(&json!({}), &ignored), "no field at all");
        // An index cannot be resolved without the object.
        let containers = json!({"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}}}}});
        assert!(!only_ignored(
            &containers,
            &["/spec/containers/0".to_string()]
        ));
        assert!(only_ignored(&containers, &["/spec/containers".to_string()]));
        // Escaped tokens.
        let annotation = json!({"f:metadata": {"f:annotations": {"f:a/b": {}}}});
        assert!(only_ignored(
            &annotation,
            &["/metadata/annotations/a~1b".to_string()]
        ));
    }
}
