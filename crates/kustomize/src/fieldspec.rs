//! Field specs: where in which kinds a transformer works (`group/version/kind` + a
//! slash-separated path), and the walk that visits those fields in an object.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::resource::Gvk;

/// One place a transformer works on, as kustomize's `fieldSpecs` entries write it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// API group of the kinds selected; empty selects every group.
    #[serde(default)]
    pub group: String,
    /// API version selected; empty selects every version.
    #[serde(default)]
    pub version: String,
    /// Kind selected; empty selects every kind.
    #[serde(default)]
    pub kind: String,
    /// Slash-separated path; sequences met on the way are walked element by element.
    pub path: String,
    /// Whether missing fields along the path are created.
    #[serde(default)]
    pub create: bool,
}

impl FieldSpec {
    /// A spec for every kind.
    pub fn any_kind(path: &str, create: bool) -> Self {
        FieldSpec {
            path: path.to_string(),
            create,
            ..FieldSpec::default()
        }
    }

    /// A spec for one kind (any group and version).
    pub fn for_kind(kind: &str, path: &str, create: bool) -> Self {
        FieldSpec {
            kind: kind.to_string(),
            path: path.to_string(),
            create,
            ..FieldSpec::default()
        }
    }

    /// A spec for one group and kind.
    pub fn for_group_kind(group: &str, kind: &str, path: &str, create: bool) -> Self {
        FieldSpec {
            group: group.to_string(),
            kind: kind.to_string(),
            path: path.to_string(),
            create,
            ..FieldSpec::default()
        }
    }

    /// The selector part of the spec.
    pub fn gvk(&self) -> Gvk {
        Gvk {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }

    /// Whether this spec applies to objects of `gvk`.
    pub fn selects(&self, gvk: &Gvk) -> bool {
        self.gvk().selects(gvk)
    }

    /// The path split into field names. `/` inside `[...]` does not split, `\/` is a
    /// literal slash, and a trailing `[]` on a segment (an explicit "each element") is
    /// dropped because sequences are walked anyway.
    pub fn segments(&self) -> Vec<String> {
        split_path(&self.path)
    }
}

/// Splits a field-spec path as [`FieldSpec::segments`] describes.
pub fn split_path(path: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'/') => {
                current.push('/');
                chars.next();
            }
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            '/' if depth == 0 => segments.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    segments.push(current);
    segments
        .into_iter()
        .map(|s| s.strip_suffix("[]").map(str::to_string).unwrap_or(s))
        .filter(|s| !s.is_empty())
        .collect()
}

/// Calls `visit` on every value found at `segments` under `node`.
///
/// Sequences met along the way (including at the end of the path) are walked element by
/// element. When `create` is set, missing maps along the path are created and a missing
/// last field is inserted as `null` before `visit` sees it; `visit` decides what to write.
/// Without `create`, objects lacking the path are skipped. A `null` met along the path is
/// treated as missing.
pub fn visit_fields<E>(
    node: &mut Value,
    segments: &[String],
    create: bool,
    visit: &mut dyn FnMut(&mut Value) -> Result<(), E>,
) -> Result<(), E> {
    let Some((first, rest)) = segments.split_first() else {
        return match node {
            Value::Array(items) => {
                for item in items {
                    visit(item)?;
                }
                Ok(())
            }
            _ => visit(node),
        };
    };
    match node {
        Value::Array(items) => {
            for item in items {
                visit_fields(item, segments, create, visit)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let present = map.get(first).is_some_and(|v| !v.is_null());
            if !present {
                if !create {
                    return Ok(());
                }
                let fresh = if rest.is_empty() {
                    Value::Null
                } else {
                    Value::Object(Map::new())
                };
                map.insert(first.clone(), fresh);
            }
            match map.get_mut(first) {
                Some(child) => visit_fields(child, rest, create, visit),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn collect(mut node: Value, path: &str, create: bool) -> (Value, Vec<Value>) {
        let mut seen = Vec::new();
        visit_fields::<()>(&mut node, &split_path(path), create, &mut |v| {
            seen.push(v.clone());
            if v.is_null() {
                *v = json!("new");
            }
            Ok(())
        })
        .unwrap();
        (node, seen)
    }

    #[test]
    fn splits_paths_with_brackets_and_escapes() {
        assert_eq!(
            split_path("spec/template/spec"),
            ["spec", "template", "spec"]
        );
        assert_eq!(
            split_path("a/containers[]/image"),
            ["a", "containers", "image"]
        );
        assert_eq!(
            split_path("metadata/annotations/a.b\\/c"),
            ["metadata", "annotations", "a.b/c"]
        );
        assert_eq!(split_path("a/[x=y/z]/b"), ["a", "[x=y/z]", "b"]);
    }

    #[test]
    fn walks_sequences_element_by_element() {
        let obj = json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}, {"name": "c"}]}});
        let (_, seen) = collect(obj, "spec/containers/image", false);
        assert_eq!(seen, [json!("a"), json!("b")]);
    }

    #[test]
    fn creates_missing_fields_only_when_asked() {
        let (obj, seen) = collect(json!({"metadata": {}}), "metadata/labels/app", false);
        assert!(seen.is_empty());
        assert_eq!(obj, json!({"metadata": {}}));
        let (obj, seen) = collect(json!({"metadata": {}}), "metadata/labels/app", true);
        assert_eq!(seen, [Value::Null]);
        assert_eq!(obj, json!({"metadata": {"labels": {"app": "new"}}}));
    }
}
