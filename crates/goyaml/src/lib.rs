#![doc = include_str!("../README.md")]
//!
//! ## The rules in detail
//!
//! Reading follows go-yaml v3's resolver (what kyaml uses): only `true`/`false` (three
//! spellings) are booleans, `null`/`~`/empty are null, integers use Go's base-0 syntax with `_`
//! removed (`0755` is octal 493, `0x1F`, `0o17`, `0b1`, `1_000`) plus go-yaml's signed
//! `0b`/`0o` forms (`0b-1`, `0o+7`), YAML-style floats, and text starting with `.` that Go's
//! `ParseFloat` takes (`.5_5`); quoted and block scalars are strings. Anchors, aliases and `<<`
//! merge keys are expanded as kyaml's `DeAnchor` does. Keys are the scalar's text (`1: a` has
//! key `"1"`). Duplicate keys are an error. Choices forced by JSON values:
//! - `.inf`, `-.inf`, `.nan` (any spelling) become the strings `".inf"`, `"-.inf"`, `".nan"`;
//! - integers beyond `u64` (or below `i64::MIN`) become floats, as go-yaml does; floats that
//!   overflow `f64` (`1e400`) stay strings, as go-yaml does;
//! - timestamps (go-yaml's `parseTimestamp`: Go's `time.Parse` with its four layouts) become
//!   the RFC 3339 text Go's JSON encoding prints for a `time.Time`; `!!binary` is decoded and
//!   its bytes taken as text (invalid UTF-8 bytes become U+FFFD), as go-yaml and JSON encoding
//!   do; unknown tags keep the text.
//!
//! Block scalars read as go-yaml's scanner reads them: a last line that ends the input without
//! a line break gets none (`k: |\n  a\n  b` is `"a\nb"`). [`parse_documents`] also applies
//! what kyaml's output does to folded scalars: kustomize writes each resource with go-yaml v3
//! and reads it back, and go-yaml v3's writer puts an empty line before every more-indented
//! line of a folded scalar (`>-\n  a\n    b` comes out as `"a\n\n  b"`, not `"a\n  b"`),
//! unless the value starts with a blank or go-yaml writes it quoted.
//! [`parse_documents_yaml11`] resolves as go-yaml v2 does (YAML 1.1 booleans, timestamps kept
//! as written).
//!
//! Writing follows kustomize's output (go-yaml v2 via `sigs.k8s.io/yaml`): block style, 2-space
//! indentation, sequences under a mapping key not indented, keys in the map's order (see
//! [`sort_keys`] for go-yaml's), long lines folded at column 80, multi-line strings as literal
//! blocks. A string is written as go-yaml v2's `encoder.stringv` and emitter decide:
//! - double-quoted when go-yaml v2 would read the plain text back as something else: null
//!   (`""`, `~`, `null`), a YAML 1.1 boolean (`y`, `yes`, `on`, `off`, ...), a number in its
//!   syntax (`8080`, `0x1F`, `0b-1`, `1_000`, `.5`, `1e3`, `.inf`), a timestamp
//!   (`2001-12-14`), or a base-60 float (`1:20`). Anything else may be plain, such as `=`,
//!   `<<`, `1e400` or `0x10000000000000000`;
//! - single-quoted when the emitter does not allow it plain: leading or trailing spaces,
//!   `- `, `? `, `: ` or ` #` where they would be syntax, a leading indicator
//!   (`#,[]{}&*!|>'"%@` and backquote), `---` or `...` at the start, line breaks;
//! - double-quoted when single quotes are not allowed either: tabs, control characters,
//!   U+0085, U+FEFF, characters outside the BMP, a space next to a line break;
//! - a literal block when it contains `\n` (double-quoted as a simple key or when it has
//!   trailing spaces or special characters). U+2028 and U+2029 are line breaks to go-yaml's
//!   writer: written as they are, with what follows indented as on a new line.
//!
//! Before that, a U+0085 (NEL) is folded as go-yaml v2 folds it when it reads the JSON text
//! kustomize hands it: Go does not escape it, so inside the quoted JSON string it is a line
//! break (`"a\u{85}b"` prints as `a b`).
//! Floats print like Go's `%g` (`0.5`, `1e-06`, `1.5e+20`) with `.0` added to whole numbers
//! (`1.0`) so that they read back as floats.

mod block;
pub mod go_json;
mod key_order;
mod read;
pub mod scalar;
mod timestamp;
mod unicode_go;
mod write;

pub use key_order::go_key_order;
pub use timestamp::GoTime;

use read::Reading;
pub use read::{Booleans, DuplicateKeys, MAX_ALIAS_BYTES, MAX_DEPTH, PathStep, PlainText};

use serde_json::Value;

/// A YAML document that could not be read; the message names the line (and column).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(pub String);

/// Parses every document of a YAML stream as kustomize reads a resource and prints it: kyaml
/// reads it with go-yaml v3, and writes it with go-yaml v3 and reads it back before turning
/// it into JSON, which adds an empty line before the more-indented lines of folded (`>`)
/// scalars. Empty documents (and null ones) are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, reading(DuplicateKeys::Error, Booleans::Yaml12, true))
}

/// Parses like [`parse_documents`], and gives each document with its plain scalars that were
/// not read as the strings they are written as (see [`PlainText`]), in document order.
pub fn parse_documents_with_plain_texts(
    text: &str,
) -> Result<Vec<(Value, Vec<PlainText>)>, YamlError> {
    read::parse_documents_with_plain_texts(
        text,
        reading(DuplicateKeys::Error, Booleans::Yaml12, true),
    )
}

/// Parses like [`parse_documents`], but exactly as go-yaml v3 reads the text, without kyaml's
/// write-and-read-back: for YAML that kustomize reads with go-yaml v3 but does not print as
/// a resource.
pub fn parse_documents_go_yaml_v3(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, reading(DuplicateKeys::Error, Booleans::Yaml12, false))
}

/// Parses like [`parse_documents_go_yaml_v3`], but a key repeated in one map keeps its last
/// value, as kustomize does when it reads a kustomization file.
pub fn parse_documents_last_key_wins(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(
        text,
        reading(DuplicateKeys::LastWins, Booleans::Yaml12, false),
    )
}

/// Parses as go-yaml v2 (YAML 1.1) reads: plain `yes`/`no`/`on`/`off`/`y`/`n` are booleans,
/// and no kyaml write-and-read-back. Flux reads post-build substituted text that way.
pub fn parse_documents_yaml11(text: &str) -> Result<Vec<Value>, YamlError> {
    read::parse_documents(text, reading(DuplicateKeys::Error, Booleans::Yaml11, false))
}

fn reading(duplicate_keys: DuplicateKeys, booleans: Booleans, kyaml_output: bool) -> Reading {
    Reading {
        duplicate_keys,
        booleans,
        kyaml_output,
    }
}

/// Sorts map keys at every level in go-yaml's order ([`go_key_order`]), as kustomize's output
/// (JSON turned into YAML by go-yaml v2) has them.
pub fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            key_order::sort_map(map);
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
