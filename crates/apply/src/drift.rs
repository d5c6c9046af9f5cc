//! Who wrote a managed object last, told from its `managedFields` alone, and whether that
//! write touched only fields a Kustomization leaves to others (`spec.ignore`): what a watch of
//! object metadata needs to tell drift from the controller's own applies and from status
//! updates. And, from a live object and the dry-run of its configuration, how it drifted:
//! which fields an apply would change and which managers wrote them ([`drift_of`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::{Map, Value};

use super::field_paths::{self, FieldPath, Step};
use super::ignore::{self, IgnorePatchError, IgnoreRules};
use super::managed_fields::{CLEANUP_ANNOTATIONS, CLEANUP_LABELS, FieldManager, owned_fields};

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
/// entries sharing the newest time are a status update only if all of them are status
/// entries (a workload controller may update the status in the same second as somebody edits
/// the spec), and [`LastWrite::Tied`] when `field_manager`'s is among them with another
/// manager's.
pub fn last_write(entries: &[ManagedFieldsEntry], field_manager: &str) -> LastWrite {
    let Some(newest) = entries.iter().filter_map(|e| e.time.as_ref()).max() else {
        return LastWrite::Unknown;
    };
    let latest: Vec<&ManagedFieldsEntry> = entries
        .iter()
        .filter(|e| e.time.as_ref() == Some(newest))
        .filter(|e| e.subresource.as_deref() != Some("status"))
        .collect();
    if latest.is_empty() {
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

/// How one object drifted from the configuration the controller applies to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drift {
    /// The fields an apply would change, sorted by path; none when nothing would.
    pub fields: Vec<DriftedField>,
    /// The object is gone (somebody deleted it).
    pub deleted: bool,
}

/// One field an apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftedField {
    /// Where, as kubectl shows paths: `.spec.template.spec.containers[0].image`,
    /// `.metadata.annotations.team`, `.spec.ports[port=80,protocol=TCP]`.
    pub path: String,
    /// The managers other than the controller that own it (the writers of the drift), sorted;
    /// none when no entry of `managedFields` tells (a removed field is owned by nobody).
    pub managers: Vec<String>,
}

impl Drift {
    /// The drift of an object somebody deleted.
    pub fn deleted() -> Self {
        Drift {
            fields: Vec::new(),
            deleted: true,
        }
    }

    /// Whether an apply would change anything.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && !self.deleted
    }

    /// Every manager that owns a drifted field, sorted, each once.
    pub fn managers(&self) -> Vec<&str> {
        let managers: BTreeSet<&str> = self
            .fields
            .iter()
            .flat_map(|field| field.managers.iter().map(String::as_str))
            .collect();
        managers.into_iter().collect()
    }
}

/// What applying the configuration whose server-side dry-run is `dry_run` would change in
/// `live` (read before any write), with the writer of each field:
///
/// - the fields the dry-run changes, compared as the apply stage compares them (the `rules`
///   of `spec.ignore` left out), each with the managers other than `field_manager` that own
///   it in `live`, status updates excepted;
/// - the fields of the managers whose entries the apply takes over (`taken_over`: kubectl's,
///   `before-first-apply`, `--override-manager`; none under `ssa: Merge`) that the
///   configuration does not set: once they are the controller's, the apply removes them;
/// - the annotations and labels the apply stage removes (kubectl's last applied
///   configuration, Flux v1's marks).
///
/// A drift that the comparison finds but no field path names (kinds compared whole) is
/// reported as the object as a whole (`.`).
pub fn drift_of(
    live: &Value,
    dry_run: &Value,
    rules: &IgnoreRules,
    field_manager: &str,
    taken_over: &[FieldManager],
) -> Result<Drift, IgnorePatchError> {
    let entries = writers(live, field_manager);
    let mut fields: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if ignore::try_has_drifted(live, dry_run, rules)? {
        for path in ignore::try_changed_paths(live, dry_run, rules)? {
            let owners = entries
                .iter()
                .filter(|(_, owned, _)| field_paths::owns(owned, live, &path))
                .map(|(manager, _, _)| manager.to_string());
            fields.entry(path.to_string()).or_default().extend(owners);
        }
        if fields.is_empty() {
            fields.insert(".".to_string(), BTreeSet::new());
        }
    }
    let ours = owned_fields(dry_run, field_manager).and_then(Value::as_object);
    let ignored: Vec<Vec<String>> = rules
        .paths_for(dry_run)
        .iter()
        .filter_map(|pointer| segments(pointer))
        .collect();
    for (manager, owned, entry) in &entries {
        if !taken_over.iter().any(|m| m.matches(entry)) {
            continue;
        }
        for leaf in field_paths::leaves(owned) {
            let set = ours.is_some_and(|ours| field_paths::holds(ours, &leaf));
            if !set && !under(&leaf, &ignored) {
                let path = fields.entry(leaf.to_string()).or_default();
                path.insert(manager.to_string());
            }
        }
    }
    for (field, keys) in [
        ("annotations", &CLEANUP_ANNOTATIONS[..]),
        ("labels", &CLEANUP_LABELS[..]),
    ] {
        let present = live
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object);
        for key in keys
            .iter()
            .filter(|key| present.is_some_and(|m| m.contains_key(**key)))
        {
            let path = FieldPath(vec![
                Step::Field("metadata".into()),
                Step::Field(field.into()),
                Step::Field((*key).to_string()),
            ]);
            let owners = entries
                .iter()
                .filter(|(_, owned, _)| field_paths::owns(owned, live, &path))
                .map(|(manager, _, _)| manager.to_string());
            fields.entry(path.to_string()).or_default().extend(owners);
        }
    }
    Ok(Drift {
        fields: fields
            .into_iter()
            .map(|(path, managers)| DriftedField {
                path,
                managers: managers.into_iter().collect(),
            })
            .collect(),
        deleted: false,
    })
}

/// The `managedFields` entries of `object` by managers other than `field_manager`, status
/// updates left out: (manager, its `fieldsV1` set, the entry).
fn writers<'a>(
    object: &'a Value,
    field_manager: &str,
) -> Vec<(&'a str, &'a Map<String, Value>, &'a Value)> {
    let Some(entries) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let manager = entry.get("manager").and_then(Value::as_str).unwrap_or("");
            let status = entry.get("subresource").and_then(Value::as_str) == Some("status");
            let owned = entry.get("fieldsV1").and_then(Value::as_object)?;
            (manager != field_manager && !status).then_some((manager, owned, entry))
        })
        .collect()
}

/// Whether `leaf` lies under one of the `fieldsV1` key prefixes `ignored` (see [`segments`]).
fn under(leaf: &FieldPath, ignored: &[Vec<String>]) -> bool {
    let keys: Vec<String> = leaf
        .0
        .iter()
        .map(|step| match step {
            Step::Field(name) => format!("f:{name}"),
            Step::Key(key) => key.clone(),
            Step::Index(index) => index.to_string(),
        })
        .collect();
    ignored
        .iter()
        .any(|prefix| keys.len() >= prefix.len() && keys[..prefix.len()] == prefix[..])
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

    /// A Deployment's controller updating its status in the same second as `kubectl edit`
    /// changes its spec: the edit is still another manager's write.
    #[test]
    fn a_status_update_in_the_same_second_does_not_hide_an_edit() {
        let own = entry("kustomize-controller", None, 0, json!({"f:spec": {}}));
        let edit = entry("kubectl-edit", None, 5, json!({"f:spec": {"f:paused": {}}}));
        let status = entry(
            "kube-controller-manager",
            Some("status"),
            5,
            json!({"f:status": {}}),
        );
        assert_eq!(
            last_write(&[own.clone(), status.clone(), edit], "kustomize-controller"),
            LastWrite::Other {
                manager: "kubectl-edit".into(),
                fields: json!({"f:spec": {"f:paused": {}}})
            }
        );
        // With the controller's own apply in that second instead, nobody else wrote it.
        let reapplied = entry("kustomize-controller", None, 5, json!({"f:spec": {}}));
        assert_eq!(
            last_write(&[reapplied, status.clone()], "kustomize-controller"),
            LastWrite::Own
        );
        assert_eq!(
            last_write(&[own, status], "kustomize-controller"),
            LastWrite::Status
        );
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

    fn entry_json(manager: &str, operation: &str, subresource: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "subresource": subresource,
               "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    /// A ConfigMap as the API server keeps it: `data` and `annotations` as given, written
    /// by the `managers` entries.
    fn config_map(data: Value, annotations: Value, managers: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "apps", "resourceVersion": "7",
                         "annotations": annotations, "managedFields": managers},
            "data": data})
    }

    fn ours() -> Value {
        entry_json(
            "kustomize-controller",
            "Apply",
            "",
            json!({"f:data": {"f:value": {}}}),
        )
    }

    fn shown(drift: &Drift) -> Vec<(String, Vec<String>)> {
        drift
            .fields
            .iter()
            .map(|f| (f.path.clone(), f.managers.clone()))
            .collect()
    }

    fn cleanup() -> Vec<FieldManager> {
        crate::managed_fields::cleanup_managers("kustomize-controller", &[])
    }

    #[test]
    fn an_edited_field_is_drift_by_its_editor() {
        let edit = entry_json(
            "kubectl-edit",
            "Update",
            "",
            json!({"f:data": {"f:value": {}}}),
        );
        let status = entry_json(
            "kube-controller-manager",
            "Update",
            "status",
            json!({"f:data": {"f:value": {}}}),
        );
        let live = config_map(
            json!({"value": "edited"}),
            json!({}),
            vec![ours(), edit, status],
        );
        let dry_run = config_map(json!({"value": "1"}), json!({}), vec![ours()]);
        let rules = IgnoreRules::default();
        let drift =
            drift_of(&live, &dry_run, &rules, "kustomize-controller", &cleanup()).expect("drift");
        assert_eq!(
            shown(&drift),
            [(".data.value".to_string(), vec!["kubectl-edit".to_string()])]
        );
        assert_eq!(drift.managers(), ["kubectl-edit"]);
        let same = drift_of(
            &dry_run,
            &dry_run,
            &rules,
            "kustomize-controller",
            &cleanup(),
        );
        assert!(same.expect("no drift").is_empty());
    }

    #[test]
    fn fields_an_apply_would_take_over_and_remove_are_drift() {
        let annotate = entry_json(
            "kubectl-annotate",
            "Update",
            "",
            json!({"f:metadata": {"f:annotations": {"f:team": {}}}}),
        );
        let live = config_map(
            json!({"value": "1"}),
            json!({"team": "x"}),
            vec![ours(), annotate],
        );
        // The dry-run leaves a field the configuration does not set where it is.
        let dry_run = live.clone();
        let rules = IgnoreRules::default();
        let drift =
            drift_of(&live, &dry_run, &rules, "kustomize-controller", &cleanup()).expect("drift");
        assert_eq!(
            shown(&drift),
            [(
                ".metadata.annotations.team".to_string(),
                vec!["kubectl-annotate".to_string()]
            )]
        );
        // Under `ssa: Merge` nothing is taken over: no drift.
        let merged = drift_of(&live, &dry_run, &rules, "kustomize-controller", &[]);
        assert!(merged.expect("no drift").is_empty());
        // kubectl's last applied configuration is removed whoever wrote it.
        let applied = config_map(
            json!({"value": "1"}),
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
            vec![ours()],
        );
        let drift = drift_of(&applied, &applied, &rules, "kustomize-controller", &[]);
        assert_eq!(
            shown(&drift.expect("drift")),
            [(
                ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration"
                    .to_string(),
                vec![]
            )]
        );
    }

    #[test]
    fn ignored_fields_are_no_drift_and_removed_ones_have_no_writer() {
        let scaler = entry_json(
            "horizontal-pod-autoscaler",
            "Update",
            "scale",
            json!({"f:spec": {"f:replicas": {}}}),
        );
        let deployment = |replicas: u32, paused: Option<bool>, managers: Vec<Value>| {
            let mut spec = json!({"replicas": replicas});
            if let Some(paused) = paused {
                spec["paused"] = json!(paused);
            }
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "3",
                             "managedFields": managers},
                "spec": spec})
        };
        let live = deployment(5, None, vec![scaler]);
        let dry_run = deployment(1, Some(false), vec![]);
        let none = IgnoreRules::default();
        let drift = drift_of(&live, &dry_run, &none, "kustomize-controller", &cleanup());
        assert_eq!(
            shown(&drift.expect("drift")),
            [
                (".spec.paused".to_string(), vec![]),
                (
                    ".spec.replicas".to_string(),
                    vec!["horizontal-pod-autoscaler".to_string()]
                )
            ]
        );
        let rule: crate::IgnoreRule = serde_json::from_value(json!({
            "paths": ["/spec/replicas"], "target": {"kind": "Deployment"}
        }))
        .expect("a rule");
        let ignore = IgnoreRules::compile(&[rule]).expect("rules");
        let drift = drift_of(&live, &dry_run, &ignore, "kustomize-controller", &cleanup());
        assert_eq!(
            shown(&drift.expect("drift")),
            [(".spec.paused".to_string(), vec![])]
        );
    }
}
