//! The sops "stores": files in every format sops writes, read into the document model of
//! [`crate::tree`], and decrypted documents written back exactly as `sops -d` prints
//! them.
//!
//! YAML and JSON keep the metadata as a nested `sops` map; dotenv flattens it into
//! `sops_...` keys and INI into a `[sops]` section, which are unflattened here into the same
//! nested shape. The binary format is a JSON document with a single `data` value.

mod dotenv;
mod flatten;
mod ini;
mod json;
mod yaml;
mod yaml_emit;

#[cfg(test)]
mod tests;

use zeroize::Zeroizing;

use super::Format;
use super::tree::{Branch, Branches, Item, Key, Value};

/// The key the metadata lives under.
const METADATA_KEY: &str = "sops";

/// Why a file could not be read or a document could not be written.
///
/// Messages name the line, key or position at fault, never a value.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file has no sops metadata.
    #[error("sops metadata not found")]
    MetadataNotFound,
    /// The `sops` entry is not a mapping.
    #[error("the sops metadata entry is not a mapping")]
    MetadataNotMap,
    /// More than one `sops` entry in the first document.
    #[error("found a duplicate sops metadata entry")]
    DuplicateMetadata,
    /// Flattened metadata keys that do not fit together.
    #[error("cannot unflatten metadata key {key:?}: {reason}")]
    Unflatten {
        /// The flattened key.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The text is not valid in its format.
    #[error("invalid {format} at line {line}, column {column}: {reason}")]
    Syntax {
        /// The format's name.
        format: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser expected (never the text itself).
        reason: String,
    },
    /// The same key twice in one mapping.
    #[error("line {line}: mapping key {key:?} already defined")]
    DuplicateKey {
        /// 1-based line of the second occurrence.
        line: usize,
        /// The key.
        key: String,
    },
    /// A YAML document whose top level is not a mapping.
    #[error("YAML document {document} is not a mapping: only mappings are supported")]
    YamlNotMapping {
        /// 1-based document number.
        document: usize,
    },
    /// A JSON file whose top level is not an object.
    #[error("JSON files must have an object at the top level")]
    JsonNotObject,
    /// The input is not UTF-8.
    #[error("{format} input is not valid UTF-8")]
    NotUtf8 {
        /// The format's name.
        format: &'static str,
    },
    /// A dotenv line without `=`.
    #[error("invalid dotenv input at line {line}: no '=' found")]
    DotenvLine {
        /// 1-based line.
        line: usize,
    },
    /// A nested value where a flat format only takes scalars.
    #[error("cannot use a complex value in a {format} file; offending key {key:?}")]
    ComplexValue {
        /// The format's name.
        format: &'static str,
        /// The key.
        key: String,
    },
    /// An INI top-level entry whose value is not a section.
    #[error("INI section {section:?} is not a mapping")]
    IniSection {
        /// The section name.
        section: String,
    },
    /// A key that is not a string where the format needs one.
    #[error("non-string key {key:?} cannot be written as {format}")]
    NonStringKey {
        /// The format's name.
        format: &'static str,
        /// The key as written.
        key: String,
    },
    /// A value JSON cannot carry (a non-finite float).
    #[error("value of key {key:?} cannot be written as JSON")]
    JsonValue {
        /// The key (or `[index]`) at fault.
        key: String,
    },
    /// The binary store's tree has no usable `data` value.
    #[error("error emitting binary store: {0}")]
    Binary(&'static str),
}

/// Loads an encrypted file: its data branches (the `sops` entry removed from every document)
/// and the `sops` metadata as a nested [`Branch`] (dotenv/INI flattened `sops_...` keys
/// unflattened into the same nested shape YAML/JSON have).
/// [`StoreError::MetadataNotFound`] when there is none.
pub fn load_encrypted(format: Format, data: &[u8]) -> Result<(Branches, Branch), StoreError> {
    match format {
        Format::Yaml | Format::Json | Format::Binary => {
            let branches = match format {
                Format::Yaml => yaml::load(data)?,
                _ => json::load(data)?,
            };
            split_metadata(branches)
        }
        Format::Dotenv => dotenv::split_metadata(dotenv::load(data)?),
        Format::Ini => ini::split_metadata(ini::load(data)?),
    }
}

/// Loads a file without metadata (used by tests and to compare with sops).
pub fn load_plain(format: Format, data: &[u8]) -> Result<Branches, StoreError> {
    match format {
        Format::Yaml => yaml::load(data),
        Format::Json => json::load(data),
        Format::Dotenv => dotenv::load(data),
        Format::Ini => ini::load(data),
        Format::Binary => {
            let value = match std::str::from_utf8(data) {
                Ok(text) => Value::String(text.to_string()),
                Err(_) => Value::Bytes(data.to_vec()),
            };
            Ok(Branches(vec![vec![Item {
                key: Key::Name("data".into()),
                value,
            }]]))
        }
    }
}

/// Writes decrypted branches as `sops -d --output-type <format>` prints them (byte for byte).
pub fn emit_plain(format: Format, branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    match format {
        Format::Yaml => yaml_emit::emit(branches),
        Format::Json => json::emit(branches),
        Format::Dotenv => dotenv::emit(branches),
        Format::Ini => ini::emit(branches),
        Format::Binary => emit_binary(branches),
    }
}

/// A built Kubernetes object (key order preserved) as branches, as Flux does when it
/// marshals a resource to JSON and loads it with sops' JSON store; the metadata is split off
/// like [`load_encrypted`].
pub fn branches_from_json(value: &serde_json::Value) -> Result<(Branches, Branch), StoreError> {
    let serde_json::Value::Object(map) = value else {
        return Err(StoreError::JsonNotObject);
    };
    split_metadata(Branches(vec![json::branch_from_serde(map)]))
}

/// The branches' first document as a JSON object (comments dropped), the inverse of
/// [`branches_from_json`] for the data part.
pub fn json_from_branches(branches: &Branches) -> Result<serde_json::Value, StoreError> {
    let branch = branches.0.first().map(Vec::as_slice).unwrap_or_default();
    json::serde_from_branch(branch)
}

/// The binary store: the raw bytes of the single `data` string.
fn emit_binary(branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    let [branch] = branches.0.as_slice() else {
        return Err(StoreError::Binary("there must be exactly one tree branch"));
    };
    let data = branch
        .iter()
        .find(|item| matches!(&item.key, Key::Name(k) if k == "data"))
        .ok_or(StoreError::Binary("no binary data found in tree"))?;
    match &data.value {
        Value::String(s) => Ok(Zeroizing::new(s.as_bytes().to_vec())),
        Value::Bytes(b) => Ok(Zeroizing::new(b.clone())),
        _ => Err(StoreError::Binary(
            "'data' key in tree does not have a string value",
        )),
    }
}

fn is_metadata_key(key: &Key) -> bool {
    matches!(key, Key::Name(k) if k == METADATA_KEY)
}

/// sops' `ExtractMetadata` for nested metadata: the `sops` entry is removed from every
/// document; the first document's is the metadata.
fn split_metadata(mut branches: Branches) -> Result<(Branches, Branch), StoreError> {
    let mut metadata = None;
    for (index, branch) in branches.0.iter_mut().enumerate() {
        let mut i = 0;
        while i < branch.len() {
            if !is_metadata_key(&branch[i].key) {
                i += 1;
                continue;
            }
            let item = branch.remove(i);
            if index != 0 {
                continue;
            }
            if metadata.is_some() {
                return Err(StoreError::DuplicateMetadata);
            }
            match item.value {
                Value::Map(tree) => metadata = Some(tree),
                _ => return Err(StoreError::MetadataNotMap),
            }
        }
    }
    let metadata = metadata.ok_or(StoreError::MetadataNotFound)?;
    Ok((branches, metadata))
}

/// sops' `ValToString`: how dotenv and INI print a non-string scalar.
fn value_to_string(value: &Value) -> String {
    match value {
        Value::String(s) | Value::Time(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => {
            let g = json::go_format_float(*f, 'G');
            if g.contains('.') || g.contains('E') || !f.is_finite() {
                g
            } else {
                format!("{f:.1}")
            }
        }
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Comment(c) => c.text.clone(),
        Value::Map(_) | Value::Seq(_) => String::new(),
    }
}

/// A key as text, for messages.
fn key_text(key: &Key) -> String {
    match key {
        Key::Name(k) | Key::NonString(k) => k.clone(),
        Key::Comment(_) => "#".to_string(),
    }
}
