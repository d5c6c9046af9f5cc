//! Reading Kubernetes objects from multi-document YAML.

use serde_json::Value;

use super::Object;

/// A YAML document that is not a Kubernetes object.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The text is not valid YAML.
    #[error("{origin}: invalid YAML: {message}")]
    Yaml {
        /// File (or other origin) the text came from.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A document is not a mapping.
    #[error("{origin}: document {index} is not a mapping")]
    NotAMapping {
        /// File the document came from.
        origin: String,
        /// 1-based index of the document in the file.
        index: usize,
    },
    /// A document lacks apiVersion or kind.
    #[error("{origin}: document {index} is missing {field}")]
    MissingField {
        /// File the document came from.
        origin: String,
        /// 1-based index of the document in the file.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
    /// An item of a List kind is not an object.
    #[error("{origin}: document {index}: item {item} of {kind} is not a Kubernetes object")]
    BadListItem {
        /// File the document came from.
        origin: String,
        /// 1-based index of the document in the file.
        index: usize,
        /// The List's kind.
        kind: String,
        /// 0-based index of the item.
        item: usize,
    },
}

/// Parses every object in a multi-document YAML text. Empty documents are skipped and
/// `*List` kinds with `items` are expanded into their items. `origin` names the text in
/// errors (usually its path inside the artifact).
pub fn parse_objects(text: &str, origin: &str) -> Result<Vec<Object>, ManifestError> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
    };
    let documents: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|err| {
            ManifestError::Yaml {
                origin: origin.to_string(),
                message: err.to_string(),
            }
        })?;
    let mut objects = Vec::new();
    for (position, document) in documents.into_iter().enumerate() {
        let index = position + 1;
        let map = match document {
            Value::Null => continue,
            Value::Object(map) if map.is_empty() => continue,
            Value::Object(map) => map,
            _ => {
                return Err(ManifestError::NotAMapping {
                    origin: origin.to_string(),
                    index,
                });
            }
        };
        let object = checked_object(map, origin, index)?;
        if is_list(&object) {
            expand_list(object, origin, index, &mut objects)?;
        } else {
            objects.push(object);
        }
    }
    Ok(objects)
}

fn checked_object(
    map: serde_json::Map<String, Value>,
    origin: &str,
    index: usize,
) -> Result<Object, ManifestError> {
    for field in ["apiVersion", "kind"] {
        if map
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ManifestError::MissingField {
                origin: origin.to_string(),
                index,
                field,
            });
        }
    }
    Ok(Object::new(map))
}

fn is_list(object: &Object) -> bool {
    object.kind().ends_with("List") && object.as_map().get("items").is_some_and(Value::is_array)
}

fn expand_list(
    list: Object,
    origin: &str,
    index: usize,
    out: &mut Vec<Object>,
) -> Result<(), ManifestError> {
    let kind = list.kind().to_string();
    let mut map = list.into_map();
    let Some(Value::Array(items)) = map.remove("items") else {
        return Ok(());
    };
    for (item_index, item) in items.into_iter().enumerate() {
        let bad_item = || ManifestError::BadListItem {
            origin: origin.to_string(),
            index,
            kind: kind.clone(),
            item: item_index,
        };
        let Value::Object(item) = item else {
            return Err(bad_item());
        };
        let object = checked_object(item, origin, index).map_err(|_| bad_item())?;
        if is_list(&object) {
            expand_list(object, origin, index, out)?;
        } else {
            out.push(object);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_with_empty_documents_and_comments() {
        let text = "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  on: on\n  replicas: 3\n  t: true\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n";
        let objects = parse_objects(text, "x.yaml").unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].name(), "a");
        // YAML 1.2, as kustomize's kyaml reads it: `on` stays a string.
        assert_eq!(
            objects[0].as_map()["data"]["on"],
            Value::String("on".into())
        );
        assert_eq!(objects[0].as_map()["data"]["replicas"], Value::from(3));
        assert_eq!(objects[0].as_map()["data"]["t"], Value::Bool(true));
        assert_eq!(objects[1].kind(), "Namespace");
    }

    #[test]
    fn lists_are_expanded() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ConfigMapList\n  items:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: b}\n";
        let objects = parse_objects(text, "list.yaml").unwrap();
        let names: Vec<_> = objects.iter().map(Object::name).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn errors_name_the_file_and_document() {
        let err =
            parse_objects("apiVersion: v1\nkind: A\n---\nkind: B\n", "dir/bad.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "dir/bad.yaml: document 2 is missing apiVersion"
        );
        let err = parse_objects("- a\n- b\n", "seq.yaml").unwrap_err();
        assert_eq!(err.to_string(), "seq.yaml: document 1 is not a mapping");
        let err = parse_objects("a: [b\n", "broken.yaml").unwrap_err();
        assert!(
            err.to_string().starts_with("broken.yaml: invalid YAML"),
            "{err}"
        );
        let err = parse_objects("apiVersion: v1\nkind: A\nkind: B\n", "dup.yaml").unwrap_err();
        assert!(
            err.to_string().starts_with("dup.yaml: invalid YAML"),
            "{err}"
        );
        let err = parse_objects("apiVersion: v1\nkind: List\nitems: [1]\n", "l.yaml").unwrap_err();
        assert!(matches!(err, ManifestError::BadListItem { item: 0, .. }));
    }
}
