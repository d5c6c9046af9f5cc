//! [`Object`]: one Kubernetes object as it flows between pipeline stages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A Kubernetes object of any kind, as an order-preserving JSON map.
///
/// Stages never convert objects to typed structs, so unknown kinds and custom resources pass
/// through untouched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Object(Map<String, Value>);

impl Object {
    /// Wraps a JSON map.
    pub fn new(map: Map<String, Value>) -> Self {
        Object(map)
    }

    /// The underlying map.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The underlying map, mutably.
    pub fn as_map_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.0
    }

    /// Consumes the object into its map.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }

    /// `apiVersion`, or "" when absent.
    pub fn api_version(&self) -> &str {
        self.0
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `kind`, or "" when absent.
    pub fn kind(&self) -> &str {
        self.0.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version()
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The API version without the group.
    pub fn version(&self) -> &str {
        let api_version = self.api_version();
        api_version
            .rsplit_once('/')
            .map_or(api_version, |(_, version)| version)
    }

    fn metadata_str(&self, field: &str) -> Option<&str> {
        self.0.get("metadata")?.get(field)?.as_str()
    }

    /// `metadata.name`, or "" when absent.
    pub fn name(&self) -> &str {
        self.metadata_str("name").unwrap_or("")
    }

    /// `metadata.namespace`, when set and not empty.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata_str("namespace").filter(|ns| !ns.is_empty())
    }

    /// Sets `metadata.namespace`.
    pub fn set_namespace(&mut self, namespace: &str) {
        self.metadata_mut()
            .insert("namespace".into(), Value::String(namespace.into()));
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.0.get("metadata")?.get("labels")?.get(key)?.as_str()
    }

    /// The value of an annotation.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.0
            .get("metadata")?
            .get("annotations")?
            .get(key)?
            .as_str()
    }

    /// Sets labels, overriding existing keys.
    pub fn set_labels(&mut self, labels: &BTreeMap<String, String>) {
        self.set_string_map("labels", labels);
    }

    /// Sets annotations, overriding existing keys.
    pub fn set_annotations(&mut self, annotations: &BTreeMap<String, String>) {
        self.set_string_map("annotations", annotations);
    }

    fn set_string_map(&mut self, field: &str, entries: &BTreeMap<String, String>) {
        if entries.is_empty() {
            return;
        }
        let metadata = self.metadata_mut();
        let map = metadata
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
        if !map.is_object() {
            *map = Value::Object(Map::new());
        }
        if let Value::Object(map) = map {
            for (key, value) in entries {
                map.insert(key.clone(), Value::String(value.clone()));
            }
        }
    }

    fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        let metadata = self
            .0
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
        match metadata {
            Value::Object(map) => map,
            _ => unreachable!("metadata was just made an object"),
        }
    }

    /// A short human description: `Kind/namespace/name` or `Kind/name`, as in Flux's events.
    pub fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{}/{}/{}", self.kind(), ns, self.name()),
            None => format!("{}/{}", self.kind(), self.name()),
        }
    }
}

impl From<Object> for Value {
    fn from(object: Object) -> Self {
        Value::Object(object.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Object {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn accessors() {
        let obj = object(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod", "labels": {"a": "b"}}
        }));
        assert_eq!(
            (obj.group(), obj.version(), obj.kind()),
            ("apps", "v1", "Deployment")
        );
        assert_eq!((obj.name(), obj.namespace()), ("web", Some("prod")));
        assert_eq!(obj.label("a"), Some("b"));
        assert_eq!(obj.describe(), "Deployment/prod/web");
        let core =
            object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
        assert_eq!((core.group(), core.version()), ("", "v1"));
        assert_eq!(core.describe(), "Namespace/x");
    }

    #[test]
    fn labels_are_merged_over_existing_ones() {
        let mut obj = object(
            json!({"kind": "ConfigMap", "metadata": {"labels": {"keep": "1", "over": "old"}}}),
        );
        obj.set_labels(&BTreeMap::from([
            ("over".into(), "new".into()),
            ("add".into(), "2".into()),
        ]));
        assert_eq!(obj.label("keep"), Some("1"));
        assert_eq!(obj.label("over"), Some("new"));
        assert_eq!(obj.label("add"), Some("2"));
    }

    #[test]
    fn metadata_is_created_when_missing() {
        let mut obj = object(json!({"kind": "ConfigMap", "metadata": null}));
        obj.set_namespace("ns");
        obj.set_annotations(&BTreeMap::from([("k".into(), "v".into())]));
        assert_eq!(obj.namespace(), Some("ns"));
        assert_eq!(obj.annotation("k"), Some("v"));
    }
}
