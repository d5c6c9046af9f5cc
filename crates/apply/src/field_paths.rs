//! Field paths: where two versions of an object differ, the fields a `managedFields` entry
//! owns, and whether an entry owns a given field. Paths are shown as kubectl and Flux's
//! helm-controller show them: `.spec.template.spec.containers[0].image`, with list items of a
//! `fieldsV1` set named by their key (`.spec.containers[name=app]`).

use std::fmt;

use serde_json::{Map, Value};

/// One step of a path into an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A field of a map (`f:<name>` in `fieldsV1`).
    Field(String),
    /// A list item by position, as in an object.
    Index(usize),
    /// A list item by its `fieldsV1` key (`k:{...}`, `v:...`, `i:<n>`).
    Key(String),
}

/// A path into an object, shown as `.a.b[0]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(pub(crate) Vec<Step>);

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(".");
        }
        for step in &self.0 {
            match step {
                Step::Field(name) => write!(f, ".{name}")?,
                Step::Index(index) => write!(f, "[{index}]")?,
                Step::Key(key) => write!(f, "[{}]", shown_key(key))?,
            }
        }
        Ok(())
    }
}

/// A `fieldsV1` list item key as a reader takes it: `k:{"name":"app"}` is `name=app`,
/// `v:"x"` is `x`, `i:2` is `2`.
fn shown_key(key: &str) -> String {
    if let Some(fields) = key.strip_prefix("k:") {
        return match serde_json::from_str::<Map<String, Value>>(fields) {
            Ok(fields) => fields
                .iter()
                .map(|(name, value)| format!("{name}={}", scalar(value)))
                .collect::<Vec<_>>()
                .join(","),
            Err(_) => fields.to_string(),
        };
    }
    if let Some(value) = key.strip_prefix("v:") {
        return serde_json::from_str::<Value>(value)
            .map_or_else(|_| value.to_string(), |v| scalar(&v));
    }
    key.strip_prefix("i:").unwrap_or(key).to_string()
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The paths at which `a` and `b` differ: the deepest field where one has a value the other
/// has not or a different one. Lists of different lengths differ as a whole.
pub(crate) fn differences(a: &Value, b: &Value) -> Vec<FieldPath> {
    let mut out = Vec::new();
    diff_into(a, b, &mut Vec::new(), &mut out);
    out
}

fn diff_into(a: &Value, b: &Value, path: &mut Vec<Step>, out: &mut Vec<FieldPath>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let extra = b.keys().filter(|key| !a.contains_key(*key));
            for key in a.keys().chain(extra) {
                path.push(Step::Field(key.clone()));
                match (a.get(key), b.get(key)) {
                    (Some(a), Some(b)) => diff_into(a, b, path, out),
                    _ => out.push(FieldPath(path.clone())),
                }
                path.pop();
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (a, b)) in a.iter().zip(b).enumerate() {
                path.push(Step::Index(index));
                diff_into(a, b, path, out);
                path.pop();
            }
        }
        (a, b) if a != b => out.push(FieldPath(path.clone())),
        _ => {}
    }
}

/// The fields a `fieldsV1` set names: each key whose set is empty, or the item or map a `.`
/// key stands for.
pub(crate) fn leaves(fields: &Map<String, Value>) -> Vec<FieldPath> {
    let mut out = Vec::new();
    leaves_into(fields, &mut Vec::new(), &mut out);
    out
}

fn leaves_into(node: &Map<String, Value>, path: &mut Vec<Step>, out: &mut Vec<FieldPath>) {
    for (key, child) in node {
        if key == "." {
            out.push(FieldPath(path.clone()));
            continue;
        }
        path.push(step_of_key(key));
        match child.as_object() {
            Some(children) if !children.is_empty() => leaves_into(children, path, out),
            _ => out.push(FieldPath(path.clone())),
        }
        path.pop();
    }
}

fn step_of_key(key: &str) -> Step {
    match key.strip_prefix("f:") {
        Some(name) => Step::Field(name.to_string()),
        None => Step::Key(key.to_string()),
    }
}

fn key_of_step(step: &Step) -> Option<String> {
    match step {
        Step::Field(name) => Some(format!("f:{name}")),
        Step::Key(key) => Some(key.clone()),
        Step::Index(_) => None,
    }
}

/// Whether the `fieldsV1` set `fields` holds the field at `path` (a path from [`leaves`]), or
/// a field that contains it as a whole.
pub(crate) fn holds(fields: &Map<String, Value>, path: &FieldPath) -> bool {
    let mut node = fields;
    for step in &path.0 {
        let Some(child) = key_of_step(step).and_then(|key| node.get(&key)) else {
            return false;
        };
        match child.as_object() {
            Some(children) if !children.is_empty() => node = children,
            _ => return true,
        }
    }
    true
}

/// Whether the `fieldsV1` set `fields` owns the field of `object` at `path` (a path from
/// [`differences`], whose list items are positions in `object`), a field inside it, or a
/// field that contains it as a whole (a list item owned as such, `.`, holds its key fields).
/// A list item the object does not have is owned by nobody.
pub(crate) fn owns(fields: &Map<String, Value>, object: &Value, path: &FieldPath) -> bool {
    let mut node = fields;
    let mut current = Some(object);
    let mut in_item = false;
    for step in &path.0 {
        let key = match step {
            Step::Field(name) => {
                current = current.and_then(|value| value.get(name));
                format!("f:{name}")
            }
            Step::Key(key) => key.clone(),
            Step::Index(index) => {
                let item = current.and_then(|value| value.get(*index));
                current = item;
                let Some(key) = item.and_then(|item| item_key(node, item, *index)) else {
                    return false;
                };
                key
            }
        };
        let Some(child) = node.get(&key) else {
            return in_item && node.contains_key(".");
        };
        in_item = matches!(step, Step::Index(_) | Step::Key(_));
        match child.as_object() {
            Some(children) if !children.is_empty() => node = children,
            _ => return true,
        }
    }
    true
}

/// The key among `node`'s that names list item `item` at `index`.
fn item_key(node: &Map<String, Value>, item: &Value, index: usize) -> Option<String> {
    node.keys()
        .find(|key| {
            if let Some(fields) = key.strip_prefix("k:") {
                serde_json::from_str::<Map<String, Value>>(fields).is_ok_and(|fields| {
                    fields
                        .iter()
                        .all(|(name, value)| item.get(name) == Some(value))
                })
            } else if let Some(value) = key.strip_prefix("v:") {
                serde_json::from_str::<Value>(value).is_ok_and(|value| &value == item)
            } else {
                key.strip_prefix("i:") == Some(index.to_string().as_str())
            }
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(paths: &[FieldPath]) -> Vec<String> {
        paths.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn differences_name_the_deepest_field_that_differs() {
        let live = json!({"data": {"a": "1", "b": "2"},
            "spec": {"containers": [{"name": "app", "image": "x:1"}], "ports": [1]}});
        let desired = json!({"data": {"a": "1", "c": "3"},
            "spec": {"containers": [{"name": "app", "image": "x:2"}], "ports": [1, 2]}});
        assert_eq!(
            shown(&differences(&live, &desired)),
            [
                ".data.b",
                ".data.c",
                ".spec.containers[0].image",
                ".spec.ports"
            ]
        );
        assert!(differences(&live, &live).is_empty());
    }

    #[test]
    fn leaves_are_shown_with_item_keys() {
        let fields = json!({"f:metadata": {"f:annotations": {"f:a/b": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}},
                       "f:finalizers": {"v:\"x\"": {}}}});
        let fields = fields.as_object().expect("a map");
        assert_eq!(
            shown(&leaves(fields)),
            [
                ".metadata.annotations.a/b",
                ".spec.containers[name=app]",
                ".spec.containers[name=app].image",
                ".spec.finalizers[x]"
            ]
        );
        let ours = json!({"f:spec": {"f:containers": {}}});
        let ours = ours.as_object().expect("a map");
        let held: Vec<bool> = leaves(fields).iter().map(|l| holds(ours, l)).collect();
        assert_eq!(
            held,
            [false, true, true, false],
            "a whole list holds its items"
        );
    }

    #[test]
    fn ownership_resolves_list_positions_to_item_keys() {
        let object = json!({"spec": {"containers": [
            {"name": "sidecar", "image": "s:1"},
            {"name": "app", "image": "x:1", "ports": [{"containerPort": 8080, "protocol": "TCP"}]},
        ]}});
        let editor = json!({"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
            "f:image": {},
            "f:ports": {"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}}},
        }}}});
        let editor = editor.as_object().expect("a map");
        let path = |steps: Vec<Step>| FieldPath(steps);
        let field = |name: &str| Step::Field(name.to_string());
        let image = |index| {
            path(vec![
                field("spec"),
                field("containers"),
                Step::Index(index),
                field("image"),
            ])
        };
        assert!(owns(editor, &object, &image(1)));
        assert!(!owns(editor, &object, &image(0)), "another item");
        assert!(!owns(editor, &object, &image(5)), "no such item");
        let port = path(vec![
            field("spec"),
            field("containers"),
            Step::Index(1),
            field("ports"),
            Step::Index(0),
            field("containerPort"),
        ]);
        assert!(owns(editor, &object, &port), "the item as a whole");
        let list = path(vec![field("spec"), field("containers")]);
        assert!(owns(editor, &object, &list), "something inside it");
    }
}
