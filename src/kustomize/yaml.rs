//! YAML as kustomize reads and writes it.
//!
//! TEMPORARY: delegates to serde-saphyr until the kyaml-compatible reader/writer lands.

use serde_json::Value;

/// A YAML document that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(pub String);

/// Parses every document of a YAML stream; empty documents are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| YamlError(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Serialises one document (no `---` separator).
pub fn to_yaml(doc: &Value) -> String {
    serde_saphyr::to_string(doc).unwrap_or_default()
}

/// Serialises documents as one stream separated by `---` lines.
pub fn to_yaml_stream<'a>(docs: impl IntoIterator<Item = &'a Value>) -> String {
    docs.into_iter()
        .map(to_yaml)
        .collect::<Vec<_>>()
        .join("---\n")
}
