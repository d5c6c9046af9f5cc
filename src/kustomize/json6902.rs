//! JSON patches (RFC 6902) as kustomize applies them: the operations may be written in
//! JSON or YAML; `add`, `remove`, `replace`, `move`, `copy` and `test` are supported.

use json_patch::PatchOperation;
use serde_json::Value;

use super::patch::PatchError;
use super::resource::Object;

/// Parses a list of JSON patch operations written in JSON (text starting with `[`) or YAML
/// (only the first document counts, as in kustomize).
pub fn parse_ops(ops_text: &str) -> Result<Vec<PatchOperation>, String> {
    let value: Value = if ops_text.starts_with('[') {
        serde_json::from_str(ops_text).map_err(|e| e.to_string())?
    } else {
        super::yaml::parse_documents(ops_text)
            .map_err(|e| e.to_string())?
            .into_iter()
            .next()
            .unwrap_or(Value::Null)
    };
    if !value.is_array() {
        return Err("a JSON patch must be a list of operations".to_string());
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Applies already parsed operations to `target`; `file` names the patch in errors.
pub fn apply_ops(
    target: &mut Object,
    ops: &[PatchOperation],
    file: &str,
) -> Result<(), PatchError> {
    let mut doc = Value::Object(std::mem::take(target));
    let result = json_patch::patch(&mut doc, ops);
    // json_patch undoes a failed patch, so the document is intact either way.
    let restored = match doc {
        Value::Object(map) => Some(map),
        _ => None,
    };
    if let Err(e) = result {
        *target = restored.unwrap_or_default();
        return Err(PatchError::Json6902 {
            patch: file.to_string(),
            message: e.to_string(),
        });
    }
    match restored {
        Some(map) => {
            *target = map;
            Ok(())
        }
        None => Err(PatchError::Json6902 {
            patch: file.to_string(),
            message: "the patched document is no longer an object".to_string(),
        }),
    }
}

/// Applies the JSON patch `ops_text` (JSON or YAML) to `target`; `file` names the patch
/// in errors.
pub fn apply_json6902(target: &mut Object, ops_text: &str, file: &str) -> Result<(), PatchError> {
    let ops = parse_ops(ops_text).map_err(|message| PatchError::Parse {
        patch: file.to_string(),
        message,
    })?;
    apply_ops(target, &ops, file)
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
}
