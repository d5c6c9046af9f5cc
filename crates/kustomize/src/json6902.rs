//! JSON patches (RFC 6902) as kustomize applies them: the operations may be written in
//! JSON or YAML; `add`, `remove`, `replace`, `move`, `copy` and `test` are supported.

use json_patch::PatchOperation;
use serde_json::Value;

use super::resource::Object;

/// Why a JSON 6902 patch could not be applied. Worded as kustomize words it; the patch
/// transformer reports these as its own errors.
#[derive(Debug, thiserror::Error)]
pub enum Json6902Error {
    /// The patch text is not a list of JSON patch operations.
    #[error("unable to parse SM or JSON patch from {patch}: {message}")]
    Parse {
        /// The patch.
        patch: String,
        /// The parser's message.
        message: String,
    },
    /// An operation failed, or the patched document outgrew its budget.
    #[error("applying JSON 6902 patch {patch}: {message}")]
    Apply {
        /// The patch (and target, when known).
        patch: String,
        /// The failing operation and path.
        message: String,
    },
}

/// The operations RFC 6902 defines.
const OPS: [&str; 6] = ["add", "remove", "replace", "move", "copy", "test"];

/// The least bound on a patched document's size (see [`apply_ops`]): far above any object the
/// API server stores (about 1.5 MiB), so only a patch that multiplies its target (`copy`
/// operations copying the document into itself) reaches it.
pub const MIN_PATCHED_BYTES: usize = 16 << 20;

/// What one node of a document is counted as, besides its text.
const NODE_OVERHEAD: usize = 48;

/// Whether `value` looks like JSON patch operations rather than a strategic merge patch: a
/// list, or a single map with an `op` field.
pub fn looks_like_ops(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => map.contains_key("op"),
        _ => false,
    }
}

/// The first document of `ops_text`: JSON when the text starts with `[`, else YAML (only
/// the first document counts, as in kustomize).
pub fn parse_ops_value(ops_text: &str) -> Result<Value, String> {
    if ops_text.starts_with('[') {
        serde_json::from_str(ops_text).map_err(|e| e.to_string())
    } else {
        Ok(goyaml::parse_documents(ops_text)
            .map_err(|e| e.to_string())?
            .into_iter()
            .next()
            .unwrap_or(Value::Null))
    }
}

/// Parses a list of JSON patch operations written in JSON (text starting with `[`) or YAML.
/// Each operation is checked: a known `op`, a `path` (and `from` for `move`/`copy`) that is a
/// JSON pointer (empty or starting with `/`, `~` only in `~0` and `~1`), and a `value` for
/// `add`, `replace` and `test`. Messages say "JSON 6902 patch" and name the operation's index.
pub fn parse_ops(ops_text: &str) -> Result<Vec<PatchOperation>, String> {
    let value = parse_ops_value(ops_text).map_err(|e| format!("JSON 6902 patch: {e}"))?;
    ops_from_value(value).map_err(|e| format!("JSON 6902 patch: {e}"))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

fn ops_from_value(value: Value) -> Result<Vec<PatchOperation>, String> {
    let Value::Array(items) = value else {
        let hint = if looks_like_ops(&value) {
            " (a single operation must still be written as a list: `- op: ...` or `[{...}]`)"
        } else {
            ""
        };
        return Err(format!(
            "expected a list of operations, got {}{hint}",
            kind_of(&value)
        ));
    };
    let mut ops = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        check_op(index, &item)?;
        let op = serde_json::from_value(item).map_err(|e| format!("operation {index}: {e}"))?;
        ops.push(op);
    }
    Ok(ops)
}

/// Checks one operation, naming its index and field.
fn check_op(index: usize, item: &Value) -> Result<(), String> {
    let Value::Object(map) = item else {
        return Err(format!(
            "operation {index}: expected a map, got {}",
            kind_of(item)
        ));
    };
    let op = match map.get("op") {
        None => return Err(format!("operation {index}: missing op")),
        Some(Value::String(op)) if OPS.contains(&op.as_str()) => op.as_str(),
        Some(Value::String(op)) => {
            return Err(format!(
                "operation {index}: unknown op '{}' (expected one of {})",
                op.escape_debug(),
                OPS.join(", ")
            ));
        }
        Some(other) => {
            return Err(format!(
                "operation {index}: op must be a string, got {}",
                kind_of(other)
            ));
        }
    };
    let pointer = |field: &str| -> Result<(), String> {
        match map.get(field) {
            None => Err(format!("operation {index} ({op}): missing {field}")),
            Some(Value::String(p)) => check_pointer(p).map_err(|why| {
                format!(
                    "operation {index} ({op}): {field} '{}' {why}",
                    p.escape_debug()
                )
            }),
            Some(other) => Err(format!(
                "operation {index} ({op}): {field} must be a string, got {}",
                kind_of(other)
            )),
        }
    };
    pointer("path")?;
    if matches!(op, "move" | "copy") {
        pointer("from")?;
    }
    if matches!(op, "add" | "replace" | "test") && !map.contains_key("value") {
        return Err(format!("operation {index} ({op}): missing value"));
    }
    Ok(())
}

/// Checks RFC 6901 syntax: empty, or `/`-separated tokens where `~` is only `~0` or `~1`.
fn check_pointer(pointer: &str) -> Result<(), &'static str> {
    if pointer.is_empty() {
        return Ok(());
    }
    if !pointer.starts_with('/') {
        return Err("must be empty or start with '/'");
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("has '~' not followed by 0 or 1 (write '~0' for '~' and '~1' for '/')");
        }
    }
    Ok(())
}

/// Bytes (text plus a per-node overhead) and depth of `value`. Documents never nest deeper
/// than the YAML reader's bound plus what a patch adds within it, so the recursion is bounded.
fn extent(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => items.iter().fold((NODE_OVERHEAD, 1), |(b, d), item| {
            let (ib, id) = extent(item);
            (b.saturating_add(ib), d.max(id + 1))
        }),
        Value::Object(map) => map.iter().fold((NODE_OVERHEAD, 1), |(b, d), (k, item)| {
            let (ib, id) = extent(item);
            (b.saturating_add(ib).saturating_add(k.len()), d.max(id + 1))
        }),
        Value::String(text) => (NODE_OVERHEAD + text.len(), 0),
        _ => (NODE_OVERHEAD, 0),
    }
}

/// Levels a JSON pointer descends.
fn pointer_depth(pointer: &str) -> usize {
    pointer.matches('/').count()
}

/// Refuses an operation that would make the document larger than `budget` bytes or deeper
/// than the YAML reader's nesting bound; `size` is the document's running estimate.
fn check_growth(
    doc: &Value,
    op: &PatchOperation,
    index: usize,
    size: &mut usize,
    budget: usize,
) -> Result<(), String> {
    let (name, path, added) = match op {
        PatchOperation::Add(o) => ("add", o.path.to_string(), Some(extent(&o.value))),
        PatchOperation::Replace(o) => ("replace", o.path.to_string(), Some(extent(&o.value))),
        PatchOperation::Copy(o) => {
            let from = o.from.to_string();
            let copied = doc.pointer(&from).map(extent);
            ("copy", o.path.to_string(), copied)
        }
        PatchOperation::Move(o) => {
            let from = o.from.to_string();
            // A move adds nothing, but may place a subtree deeper.
            let moved = doc.pointer(&from).map(|v| (0, extent(v).1));
            ("move", o.path.to_string(), moved)
        }
        PatchOperation::Remove(_) | PatchOperation::Test(_) => return Ok(()),
    };
    let Some((bytes, depth)) = added else {
        return Ok(());
    };
    if pointer_depth(&path) + depth > goyaml::MAX_DEPTH {
        return Err(format!(
            "operation {index} ({name}): the document would nest more than {} levels deep",
            goyaml::MAX_DEPTH
        ));
    }
    *size = size.saturating_add(bytes);
    if *size > budget {
        return Err(format!(
            "operation {index} ({name}): the patched document would exceed {} MiB",
            budget >> 20
        ));
    }
    Ok(())
}

/// Applies already parsed operations to `target`; `file` names the patch in errors. The
/// patched document may grow to twice its size or [`MIN_PATCHED_BYTES`], whichever is more,
/// checked before each operation; on any error the target is left as it was. Returns how
/// many bytes (estimated) the operations added.
pub fn apply_ops(
    target: &mut Object,
    ops: &[PatchOperation],
    file: &str,
) -> Result<usize, Json6902Error> {
    let original = std::mem::take(target);
    let mut doc = Value::Object(original.clone());
    let (mut size, _) = extent(&doc);
    let initial = size;
    let budget = MIN_PATCHED_BYTES.max(size.saturating_mul(2));
    let fail = |message: String| Json6902Error::Apply {
        patch: file.to_string(),
        message,
    };
    for (index, op) in ops.iter().enumerate() {
        let applied = check_growth(&doc, op, index, &mut size, budget).and_then(|()| {
            json_patch::patch(&mut doc, std::slice::from_ref(op))
                .map_err(|e| format!("operation {index}: {e}"))
        });
        if let Err(message) = applied {
            *target = original;
            return Err(fail(message));
        }
    }
    match doc {
        Value::Object(map) => {
            *target = map;
            Ok(size.saturating_sub(initial))
        }
        _ => {
            *target = original;
            Err(fail(
                "the patched document is no longer an object".to_string(),
            ))
        }
    }
}

/// Applies the JSON patch `ops_text` (JSON or YAML) to `target`; `file` names the patch
/// in errors.
pub fn apply_json6902(
    target: &mut Object,
    ops_text: &str,
    file: &str,
) -> Result<(), Json6902Error> {
    let ops = parse_ops(ops_text).map_err(|message| Json6902Error::Parse {
        patch: file.to_string(),
        message,
    })?;
    apply_ops(target, &ops, file).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(value: Value) -> Object {
        value.as_object().cloned().unwrap()
    }

    fn deployment() -> Object {
        obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "a", "image": "a:1"}]}}}}))
    }

    #[test]
    fn applies_yaml_and_json_ops() {
        let mut d = deployment();
        apply_json6902(
            &mut d,
            "- op: replace\n  path: /spec/replicas\n  value: 3\n\
             - op: add\n  path: /spec/template/spec/containers/-\n  value: {name: b, image: b:1}\n\
             - op: add\n  path: /metadata/labels\n  value: {app: web}\n",
            "patch.yaml",
        )
        .unwrap();
        assert_eq!(d["spec"]["replicas"], json!(3));
        assert_eq!(d["spec"]["template"]["spec"]["containers"][1]["name"], "b");
        assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));

        apply_json6902(
            &mut d,
            r#"[{"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
                {"op": "move", "from": "/spec/replicas", "path": "/spec/count"},
                {"op": "test", "path": "/spec/count", "value": 3},
                {"op": "remove", "path": "/spec/template/spec/containers/0"}]"#,
            "inline patch",
        )
        .unwrap();
        assert_eq!(d["metadata"]["labels"]["name"], "web");
        assert_eq!(d["spec"]["count"], json!(3));
        assert!(d["spec"].get("replicas").is_none());
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["name"], "b");
    }

    #[test]
    fn errors_name_the_patch_and_path_and_leave_the_target_intact() {
        let mut d = deployment();
        let before = d.clone();
        let err = apply_json6902(
            &mut d,
            "- op: replace\n  path: /spec/replicas\n  value: 2\n\
             - op: remove\n  path: /spec/missing\n",
            "p.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("p.yaml") && err.contains("/spec/missing"),
            "{err}"
        );
        assert_eq!(d, before);

        let err = apply_json6902(
            &mut d,
            "- op: test\n  path: /spec/replicas\n  value: 9\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("did not match"), "{err}");
        assert!(apply_json6902(&mut d, "- op: frob\n  path: /x\n", "t").is_err());
        assert!(apply_json6902(&mut d, "a: b\n", "t").is_err());
    }

    #[test]
    fn invalid_operations_are_named_by_index_and_problem() {
        let cases = [
            (
                "- op: add\n  path: /a\n  value: 1\n- op: frob\n  path: /x\n",
                "operation 1: unknown op 'frob'",
            ),
            (
                "- op: add\n  path: data/x\n  value: 1\n",
                "operation 0 (add): path 'data/x' must be empty or start with '/'",
            ),
            (
                "- op: add\n  path: /a~2b\n  value: 1\n",
                "operation 0 (add): path '/a~2b' has '~' not followed by 0 or 1",
            ),
            (
                "- op: add\n  path: /a~\n  value: 1\n",
                "not followed by 0 or 1",
            ),
            (
                "- op: add\n  path: /a\n",
                "operation 0 (add): missing value",
            ),
            (
                "- op: copy\n  path: /a\n",
                "operation 0 (copy): missing from",
            ),
            (
                "- op: move\n  from: x\n  path: /a\n",
                "operation 0 (move): from 'x' must be empty",
            ),
            ("- path: /a\n", "operation 0: missing op"),
            (
                "- op: 3\n  path: /a\n",
                "operation 0: op must be a string, got a number",
            ),
            ("- [op, add]\n", "operation 0: expected a map, got a list"),
            (
                "op: add\npath: /a\nvalue: 1\n",
                "got a map (a single operation must still be written as a list",
            ),
            (
                r#"{"op": "add", "path": "/a", "value": 1}"#,
                "a single operation must still be written as a list",
            ),
        ];
        for (text, needle) in cases {
            let err = parse_ops(text).unwrap_err();
            assert!(err.starts_with("JSON 6902 patch: "), "{err}");
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        // `value: null` is a value; `~0` and `~1` are escapes.
        assert!(parse_ops("- op: add\n  path: /a~0b~1c\n  value: null\n").is_ok());
    }

    #[test]
    fn self_copies_cannot_grow_a_document_without_bound() {
        let mut d = deployment();
        let before = d.clone();
        let ops: String = (0..40)
            .map(|i| format!("- op: copy\n  from: /spec\n  path: /spec/c{i}\n"))
            .collect();
        let started = std::time::Instant::now();
        let err = apply_json6902(&mut d, &ops, "bomb.yaml")
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert!(
            err.contains("bomb.yaml") && err.contains("would exceed"),
            "{err}"
        );
        assert!(err.contains("(copy)"), "{err}");
        assert_eq!(d, before, "the target is left as it was");
        // A few copies are fine.
        let ops: String = (0..3)
            .map(|i| format!("- op: copy\n  from: /spec\n  path: /spec/c{i}\n"))
            .collect();
        apply_json6902(&mut d, &ops, "ok.yaml").unwrap();
        assert!(d["spec"]["c2"]["c1"]["c0"].is_object());
    }

    #[test]
    fn operations_cannot_nest_a_document_without_bound() {
        let mut d = deployment();
        // Each copy puts the spec one level deeper under itself: depth doubles.
        let mut ops = String::new();
        let mut path = String::from("/spec");
        for _ in 0..200 {
            ops.push_str(&format!(
                "- op: copy\n  from: /spec/replicas\n  path: {path}/n\n"
            ));
            ops.push_str(&format!("- op: add\n  path: {path}/m\n  value: {{}}\n"));
            path.push_str("/m");
        }
        let err = apply_json6902(&mut d, &ops, "deep.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nest more than"), "{err}");
    }
}
