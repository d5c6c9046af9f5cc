#![doc = include_str!("../README.md")]
//!
//! ## The rules in detail
//!
//! Reading follows go-yaml v3's resolver (what kyaml uses): only `true`/`false` (three
//! spellings) are booleans, `null`/`~`/empty are null, integers use Go's base-0 syntax with `_`
//! removed (`0755` is octal 493, `0x1F`, `0o17`, `0b1`, `1_000`), YAML-style floats; quoted and
//! block scalars are strings. Anchors, aliases and `<<` merge keys are expanded as kyaml's
//! `DeAnchor` does. Keys are the scalar's text (`1: a` has key `"1"`). Duplicate keys are an
//! error. Choices forced by JSON values:
//! - `.inf`, `-.inf`, `.nan` (any spelling) become the strings `".inf"`, `"-.inf"`, `".nan"`;
//! - integers beyond `u64` (or below `i64::MIN`) become floats, as go-yaml does; floats that
//!   overflow `f64` (`1e400`) stay strings, as go-yaml does;
//! - timestamps stay strings; `!!binary` is decoded and its bytes taken as text (invalid UTF-8
//!   bytes become U+FFFD), as go-yaml and JSON encoding do; unknown tags keep the text.
//!
//! Writing follows kustomize's output (go-yaml v2 via `sigs.k8s.io/yaml`): block style, 2-space
//! indentation, sequences under a mapping key not indented, keys in the map's order, long
//! lines folded at column 80, multi-line strings as literal blocks. Strings that any common
//! reader (go-yaml v2/v3, PyYAML, YAML 1.2 core) would take for a non-string are
//! double-quoted (`"8080"`, `"yes"`, `"1:20"`, `"2001-12-14"`, `""`); strings that cannot be
//! plain for syntax reasons are single-quoted (`'*'`, `': x'`), or double-quoted when they hold
//! characters that need escapes (tabs, control characters, characters outside the BMP).
//! Floats print like Go's `%g` (`0.5`, `1e-06`, `1.5e+20`) with `.0` added to whole numbers
//! (`1.0`) so that they read back as floats.

pub mod go_json;
mod read;
pub mod scalar;
mod write;

pub use read::{Booleans, DuplicateKeys, MAX_ALIAS_BYTES, MAX_DEPTH};

use serde_json::Value;

/// A YAML document that could not be read; the message names the line (and column).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(pub String);

/// Parses every document of a YAML stream; empty documents (and null ones) are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, DuplicateKeys::Error, Booleans::Yaml12)
}

/// Parses like [`parse_documents`], but a key repeated in one map keeps its last value, as
/// kustomize does when it reads a kustomization file.
pub fn parse_documents_last_key_wins(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, DuplicateKeys::LastWins, Booleans::Yaml12)
}

/// Parses like [`parse_documents`], but plain `yes`/`no`/`on`/`off`/`y`/`n` are booleans, as
/// go-yaml v2 (YAML 1.1) reads them: Flux reads post-build substituted text that way.
pub fn parse_documents_yaml11(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, DuplicateKeys::Error, Booleans::Yaml11)
}

/// Sorts map keys at every level, as kustomize's output (JSON turned into YAML) has them.
pub fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// Serialises one document (no `---` separator); the text ends with a newline.
pub fn to_yaml(doc: &Value) -> String {
    let mut out = String::with_capacity(256);
    write::write_document(&mut out, doc);
    out
}

/// Serialises documents as one stream separated by `---` lines (no leading `---`).
pub fn to_yaml_stream<'a>(docs: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::with_capacity(1024);
    for (i, doc) in docs.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        write::write_document(&mut out, doc);
    }
    out
}

/// Serialises mappings as one stream separated by `---` lines, as [`to_yaml_stream`] does
/// for `Value::Object`s, without building them into values first.
pub fn mappings_to_yaml_stream<'a>(
    docs: impl IntoIterator<Item = &'a serde_json::Map<String, Value>>,
) -> String {
    let mut out = String::with_capacity(1024);
    for (i, doc) in docs.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        write::write_mapping(&mut out, doc);
    }
    out
}

#[cfg(test)]
mod tests;
