//! The `crds:` field of a kustomization: OpenAPI definition files (a map from Go type
//! names to `{Schema, Dependencies}`, as `openapi-gen` writes them) whose vendor extensions
//! add field specs to the transformer configuration (kustomize's `LoadConfigFromCRDs`).
//!
//! Every definition whose properties include `kind`, `apiVersion` and `metadata` is taken
//! as a kind named after the last `.`-separated part of its type name. Its properties are
//! walked, following `$ref`s into other definitions of the same file:
//! - `x-kubernetes-annotation` adds the property to `commonAnnotations`;
//! - `x-kubernetes-label-selector` adds it to `commonLabels`;
//! - `x-kubernetes-identity` adds it to `namePrefix`;
//! - `x-kubernetes-object-ref-api-version` with `x-kubernetes-object-ref-kind` make
//!   `<property>/<name key>` (`x-kubernetes-object-ref-name-key`, default `name`) a
//!   reference to objects of that version and kind.

use std::path::Path;

use serde_json::{Map, Value};

use super::config::{ConfigError, NameBackReference, TransformerConfig};
use super::fieldspec::FieldSpec;
use super::loader::{LoadError, Loader};
use goyaml as yaml;

const ANNOTATION: &str = "x-kubernetes-annotation";
const LABEL_SELECTOR: &str = "x-kubernetes-label-selector";
const IDENTITY: &str = "x-kubernetes-identity";
const REF_VERSION: &str = "x-kubernetes-object-ref-api-version";
const REF_KIND: &str = "x-kubernetes-object-ref-kind";
const REF_NAME_KEY: &str = "x-kubernetes-object-ref-name-key";

/// Why a `crds:` file could not be turned into configuration.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The file could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The file is not a map of OpenAPI definitions.
    #[error("unable to parse open API definition from '{file}': {source}")]
    Parse {
        /// The file as named in the kustomization.
        file: String,
        /// What is wrong.
        source: DefinitionsError,
    },
    /// The field specs of the file conflict with each other.
    #[error("'{file}': {source}")]
    Merge {
        /// The file as named in the kustomization.
        file: String,
        /// The conflict.
        source: ConfigError,
    },
}

/// Why a `crds:` file's text is not a map of OpenAPI definitions.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionsError {
    /// The text is not YAML or JSON.
    #[error(transparent)]
    Yaml(#[from] yaml::YamlError),
    /// The first document is not a map.
    #[error("expected a map from type names to definitions")]
    NotAMap,
}

/// The transformer configuration the OpenAPI definition `files` (named relative to the
/// kustomization directory `dir`) imply; empty when there are none.
pub fn config_from_crd_files(
    loader: &Loader,
    dir: &Path,
    files: &[String],
) -> Result<TransformerConfig, CrdError> {
    let mut config = TransformerConfig::default();
    for file in files {
        let text = loader.read_text(dir, file)?;
        let definitions = parse_definitions(&text).map_err(|source| CrdError::Parse {
            file: file.clone(),
            source,
        })?;
        let merge_error = |source| CrdError::Merge {
            file: file.clone(),
            source,
        };
        let from_file = config_from_definitions(&definitions).map_err(merge_error)?;
        config.merge(from_file).map_err(merge_error)?;
    }
    Ok(config)
}

/// The map of definitions of a file (JSON or YAML; the first document).
fn parse_definitions(text: &str) -> Result<Map<String, Value>, DefinitionsError> {
    let docs = yaml::parse_documents(text)?;
    match docs.into_iter().next() {
        Some(Value::Object(map)) => Ok(map),
        Some(Value::Null) | None => Ok(Map::new()),
        Some(_) => Err(DefinitionsError::NotAMap),
    }
}

/// The configuration of every kind-like definition of one file.
pub fn config_from_definitions(
    definitions: &Map<String, Value>,
) -> Result<TransformerConfig, ConfigError> {
    let mut config = TransformerConfig::default();
    for type_name in definitions.keys() {
        let Some(properties) = properties_of(definitions, type_name) else {
            continue;
        };
        if !["kind", "apiVersion", "metadata"]
            .iter()
            .all(|p| properties.contains_key(*p))
        {
            continue;
        }
        let mut walk = Walk {
            kind: kind_of_type(type_name),
            definitions,
            config: TransformerConfig::default(),
            stack: Vec::new(),
        };
        walk.definition(type_name, &[])?;
        config.merge(walk.config)?;
    }
    Ok(config)
}

/// The kind of a Go type name: what follows its last `.`.
fn kind_of_type(type_name: &str) -> String {
    type_name
        .rsplit('.')
        .next()
        .unwrap_or(type_name)
        .to_string()
}

/// `properties` of a definition's schema (`Schema` or, as Go's decoder also accepts,
/// any casing of it).
fn properties_of<'a>(
    definitions: &'a Map<String, Value>,
    type_name: &str,
) -> Option<&'a Map<String, Value>> {
    let definition = definitions.get(type_name)?.as_object()?;
    let schema = definition
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("schema"))
        .map(|(_, value)| value)?;
    schema.get("properties")?.as_object()
}

/// The walk of one kind's definitions, collecting field specs for that kind.
struct Walk<'a> {
    kind: String,
    definitions: &'a Map<String, Value>,
    config: TransformerConfig,
    /// Type names being walked, so that recursive definitions end.
    stack: Vec<String>,
}

impl Walk<'_> {
    fn definition(&mut self, type_name: &str, path: &[String]) -> Result<(), ConfigError> {
        if self.stack.iter().any(|t| t == type_name) {
            return Ok(());
        }
        let Some(properties) = properties_of(self.definitions, type_name) else {
            return Ok(());
        };
        self.stack.push(type_name.to_string());
        for (name, property) in properties {
            let mut here = path.to_vec();
            here.push(name.clone());
            self.property(property, &here)?;
        }
        self.stack.pop();
        Ok(())
    }

    fn property(&mut self, property: &Value, path: &[String]) -> Result<(), ConfigError> {
        let text = |key: &str| property.get(key).and_then(Value::as_str);
        let spec = |path: &[String]| FieldSpec::for_kind(&self.kind, &path.join("/"), false);
        let mut extra = TransformerConfig::default();
        if text(ANNOTATION).is_some() {
            extra.common_annotations.push(spec(path));
        }
        if text(LABEL_SELECTOR).is_some() {
            extra.common_labels.push(spec(path));
        }
        if text(IDENTITY).is_some() {
            extra.name_prefix.push(spec(path));
        }
        if let (Some(version), Some(kind)) = (text(REF_VERSION), text(REF_KIND)) {
            let mut name_path = path.to_vec();
            name_path.push(text(REF_NAME_KEY).unwrap_or("name").to_string());
            extra.name_reference.push(NameBackReference {
                group: String::new(),
                version: version.to_string(),
                kind: kind.to_string(),
                referrers: vec![spec(&name_path)],
            });
        }
        self.config.merge(extra)?;
        match text("$ref") {
            Some(reference) if !reference.is_empty() => self.definition(reference, path),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::LoadRestrictions;

    /// A kind `Widget` whose spec refers to a `Gear` (custom name key), a `v1` Secret, and
    /// carries label-selector, annotation and identity fields; `Gear` refers back to
    /// `Widget` so that the walk must stop.
    const DEFINITIONS: &str = r#"{
      "example.com/api/v1.Widget": {"Schema": {"properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"$ref": "meta/v1.ObjectMeta"},
        "spec": {"$ref": "example.com/api/v1.WidgetSpec"}}}},
      "example.com/api/v1.WidgetSpec": {"Schema": {"properties": {
        "gear": {"x-kubernetes-object-ref-api-version": "v2",
                 "x-kubernetes-object-ref-kind": "Gear",
                 "x-kubernetes-object-ref-name-key": "gearName",
                 "$ref": "example.com/api/v1.Gear"},
        "secretRef": {"x-kubernetes-object-ref-api-version": "v1",
                      "x-kubernetes-object-ref-kind": "Secret"},
        "selector": {"x-kubernetes-label-selector": ""},
        "notes": {"x-kubernetes-annotation": ""},
        "handle": {"x-kubernetes-identity": ""},
        "kindOnly": {"x-kubernetes-object-ref-kind": "Secret"}}}},
      "example.com/api/v1.Gear": {"Schema": {"properties": {
        "apiVersion": {}, "kind": {},
        "metadata": {"$ref": "meta/v1.ObjectMeta"},
        "owner": {"$ref": "example.com/api/v1.Widget"}}}}
    }"#;

    fn definitions(text: &str) -> Map<String, Value> {
        parse_definitions(text).unwrap()
    }

    fn referrers(config: &TransformerConfig, kind: &str) -> Vec<FieldSpec> {
        config
            .name_reference
            .iter()
            .filter(|b| b.kind == kind)
            .flat_map(|b| b.referrers.clone())
            .collect()
    }

    fn of_kind(specs: &[FieldSpec], kind: &str) -> Vec<FieldSpec> {
        specs.iter().filter(|s| s.kind == kind).cloned().collect()
    }

    #[test]
    fn object_refs_become_name_references_of_the_kind() {
        let config = config_from_definitions(&definitions(DEFINITIONS)).unwrap();
        let secret = config
            .name_reference
            .iter()
            .find(|b| b.kind == "Secret")
            .unwrap();
        assert_eq!((secret.group.as_str(), secret.version.as_str()), ("", "v1"));
        assert_eq!(
            of_kind(&secret.referrers, "Widget"),
            [FieldSpec::for_kind("Widget", "spec/secretRef/name", false)]
        );
        assert_eq!(
            of_kind(&referrers(&config, "Gear"), "Widget"),
            [FieldSpec::for_kind("Widget", "spec/gear/gearName", false)]
        );
        // A kind without an api version is no reference.
        assert!(!secret.referrers.iter().any(|s| s.path.contains("kindOnly")));
    }

    #[test]
    fn labels_annotations_and_identity_fields_are_added() {
        let config = config_from_definitions(&definitions(DEFINITIONS)).unwrap();
        assert_eq!(
            of_kind(&config.common_labels, "Widget"),
            [FieldSpec::for_kind("Widget", "spec/selector", false)]
        );
        assert_eq!(
            of_kind(&config.common_annotations, "Widget"),
            [FieldSpec::for_kind("Widget", "spec/notes", false)]
        );
        assert_eq!(
            of_kind(&config.name_prefix, "Widget"),
            [FieldSpec::for_kind("Widget", "spec/handle", false)]
        );
        assert_eq!(
            of_kind(&config.name_prefix, "Gear"),
            [FieldSpec::for_kind("Gear", "owner/spec/handle", false)]
        );
    }

    #[test]
    fn refs_are_followed_once_per_path_and_cycles_end() {
        let config = config_from_definitions(&definitions(DEFINITIONS)).unwrap();
        // Gear is a kind of its own; its `owner` leads back into Widget's spec, whose
        // references are then recorded for Gear too, but Widget is not entered twice.
        assert!(referrers(&config, "Secret").contains(&FieldSpec::for_kind(
            "Gear",
            "owner/spec/secretRef/name",
            false
        )));
        assert!(
            !referrers(&config, "Gear")
                .iter()
                .any(|s| s.path.contains("owner/spec/gear/owner"))
        );
    }

    #[test]
    fn definitions_without_kind_fields_are_not_kinds() {
        let text = r#"{"a.Spec": {"Schema": {"properties": {
            "ref": {"x-kubernetes-object-ref-api-version": "v1",
                    "x-kubernetes-object-ref-kind": "Secret"}}}}}"#;
        let config = config_from_definitions(&definitions(text)).unwrap();
        assert_eq!(config, TransformerConfig::default());
    }

    #[test]
    fn yaml_files_are_read_and_bad_ones_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let yaml_text = "x.Thing:\n  Schema:\n    properties:\n      apiVersion: {}\n      kind: {}\n      metadata: {}\n      cm:\n        x-kubernetes-object-ref-api-version: v1\n        x-kubernetes-object-ref-kind: ConfigMap\n";
        std::fs::write(root.join("thing.yaml"), yaml_text).unwrap();
        std::fs::write(root.join("bad.yaml"), "- not a map\n").unwrap();
        let loader = Loader::new(&root, LoadRestrictions::RootOnly).unwrap();
        let config = config_from_crd_files(&loader, &root, &["thing.yaml".to_string()]).unwrap();
        assert_eq!(
            referrers(&config, "ConfigMap"),
            [FieldSpec::for_kind("Thing", "cm/name", false)]
        );
        let err = config_from_crd_files(&loader, &root, &["bad.yaml".to_string()]).unwrap_err();
        assert!(err.to_string().contains("bad.yaml"), "{err}");
        let err = config_from_crd_files(&loader, &root, &["missing.json".to_string()]).unwrap_err();
        assert!(err.to_string().contains("missing.json"), "{err}");
        assert_eq!(
            config_from_crd_files(&loader, &root, &[]).unwrap(),
            TransformerConfig::default()
        );
    }
}
