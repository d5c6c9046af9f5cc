//! JSON patches (RFC 6902) as kustomize applies them: with the json-patch library (v4) it
//! builds with, in its default configuration (negative indices allowed, no copy size limit).
//! The operations may be written in JSON or YAML (YAML 1.1 scalars, as `sigs.k8s.io/yaml`
//! reads them).
//!
//! That library is more lenient than RFC 6902 in ways real kustomizations rely on, and this
//! module does what it does:
//!
//! - nothing is validated until an operation is applied (an unknown `op`, a missing `path`
//!   fail only when a resource is patched); a missing `value` is null;
//! - `replace` of a missing object member adds it; `copy` from a missing member copies null;
//! - `remove` of a missing member fails; array indices may be negative (`-1` is the last
//!   element, or the end for `add`), and are read as Go's `strconv.Atoi` reads them (`+1`,
//!   `01`); `-` appends for `add` only;
//! - a path's first token is ignored (`spec/x` is `/x`), `~` not followed by `0` or `1`
//!   stays a `~`; a path of no `/` matches nothing;
//! - `test` compares scalars by their JSON text: the document's are written as Go writes
//!   JSON (`1.0` is `1`, `<` is `\u003c`), the operation's as written when the patch is JSON,
//!   as Go writes them when it is YAML;
//! - the patched document goes through JSON: numbers become float64 (integers beyond 2^53
//!   round) and map keys are sorted (here the maps operations went through; the others are
//!   when the build's output is).
//!
//! The document is expanded lazily along the operations' paths (see [`node`]), so a deep
//! document costs no more stack than copying it.
//!
//! Error messages are the library's, prefixed with the operation's index.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::resource::Object;

mod error;
mod node;

pub use error::{
    AccessError, ApplyError, AtoiError, DocumentError, FieldError, OpError, OpsError, ScalarError,
};
use node::{Node, same};

/// Why a JSON 6902 patch could not be applied. The patch transformer reports these as its
/// own errors.
#[derive(Debug, thiserror::Error)]
pub enum Json6902Error {
    /// The patch text is not a list of JSON patch operations.
    #[error("unable to parse SM or JSON patch from {patch}: {source}")]
    Parse {
        /// The patch.
        patch: String,
        /// Why.
        source: OpsError,
    },
    /// An operation failed, or the patched document outgrew its budget.
    #[error("applying JSON 6902 patch {patch}: {source}")]
    Apply {
        /// The patch (and target, when known).
        patch: String,
        /// The failing operation and path.
        source: Box<ApplyError>,
    },
}

/// The least bound on a patched document's size (see [`apply_ops`]): far above any object the
/// API server stores (about 1.5 MiB), so only a patch that multiplies its target (`copy`
/// operations copying the document into itself) reaches it.
pub const MIN_PATCHED_BYTES: usize = 16 << 20;

/// A field of an operation that must be a string (`path`, `from`): the string, or why it
/// cannot be read.
type StringField = Result<String, FieldError>;

/// One JSON patch operation, decoded as leniently as the json-patch library decodes it.
#[derive(Clone, Debug)]
pub struct Operation {
    /// `op`, or `unknown` when it is absent or not a string.
    kind: String,
    /// `path`.
    path: StringField,
    /// `from`.
    from: StringField,
    /// `value`; `None` when the field is absent.
    value: Option<Node>,
}

/// Whether `value` looks like JSON patch operations rather than a strategic merge patch: a
/// list, or a single map with an `op` field.
pub fn looks_like_ops(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => map.contains_key("op"),
        _ => false,
    }
}

/// The first document of `ops_text`: JSON when the text starts with `[`, else YAML read as
/// go-yaml v2 reads it (YAML 1.1 booleans; only the first document counts, as in kustomize).
pub fn parse_ops_value(ops_text: &str) -> Result<Value, DocumentError> {
    if ops_text.starts_with('[') {
        Ok(serde_json::from_str(ops_text)?)
    } else {
        Ok(goyaml::parse_documents_yaml11(ops_text)?
            .into_iter()
            .next()
            .unwrap_or(Value::Null))
    }
}

/// Parses a list of JSON patch operations written in JSON (text starting with `[`) or YAML.
/// As in kustomize, the text need only be a list of maps (or nulls); the operations
/// themselves are checked when applied. Empty YAML is an empty list. Messages say
/// "JSON 6902 patch" and name the operation's index.
pub fn parse_ops(ops_text: &str) -> Result<Vec<Operation>, OpsError> {
    if ops_text.starts_with('[') {
        ops_from_json(ops_text)
    } else {
        parse_ops_value(ops_text)
            .map_err(OpsError::Document)
            .and_then(ops_from_value)
    }
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

/// Go's name for the JSON type of a value that is not a string, in its decoding errors.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null | Value::String(_) => "string",
    }
}

/// Operations from a YAML document.
fn ops_from_value(value: Value) -> Result<Vec<Operation>, OpsError> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(OpsError::NotAList {
                kind: kind_of(&other),
                single_operation: looks_like_ops(&other),
            });
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::Null => Ok(Operation::from_fields(&BTreeMap::new())),
            Value::Object(map) => {
                let fields = map
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(Field::Decoded(v))))
                    .collect();
                Ok(Operation::from_fields(&fields))
            }
            other => Err(OpsError::NotAMap {
                index,
                kind: kind_of(other),
            }),
        })
        .collect()
}

/// Operations from JSON text, each value kept as written.
fn ops_from_json(text: &str) -> Result<Vec<Operation>, OpsError> {
    let items: Vec<Box<RawValue>> =
        serde_json::from_str(text).map_err(|e| OpsError::Document(DocumentError::Json(e)))?;
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let raw = item.get().trim();
            match raw.as_bytes().first() {
                Some(b'n') => Ok(Operation::from_fields(&BTreeMap::new())),
                Some(b'{') => {
                    let map: BTreeMap<String, Option<Box<RawValue>>> = serde_json::from_str(raw)
                        .map_err(|source| OpsError::Fields { index, source })?;
                    let fields = map
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_deref().map(Field::Raw)))
                        .collect();
                    Ok(Operation::from_fields(&fields))
                }
                _ => {
                    let value: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
                    Err(OpsError::NotAMap {
                        index,
                        kind: kind_of(&value),
                    })
                }
            }
        })
        .collect()
}

/// A field of an operation as read: a YAML value, or JSON text as written. A field written
/// `null` is `None` in the map of fields.
enum Field<'a> {
    Decoded(&'a Value),
    Raw(&'a RawValue),
}

impl Field<'_> {
    fn node(&self) -> Node {
        match self {
            Field::Decoded(value) => Node::from_doc((*value).clone()),
            Field::Raw(raw) => Node::from_raw(raw.get()),
        }
    }

    /// The field as a Go string: `None` when null, else the string or Go's decoding error.
    fn string(&self) -> Option<StringField> {
        let value = match self {
            Field::Decoded(value) => (*value).clone(),
            Field::Raw(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
        };
        match value {
            Value::Null => None,
            Value::String(s) => Some(Ok(s)),
            other => Some(Err(FieldError::NotAString {
                go_type: go_type_name(&other),
            })),
        }
    }
}

impl Operation {
    fn from_fields(fields: &BTreeMap<String, Option<Field<'_>>>) -> Operation {
        let string = |name: &str| fields.get(name).and_then(|f| f.as_ref()?.string());
        let kind = match string("op") {
            Some(Ok(kind)) => kind,
            _ => "unknown".to_string(),
        };
        let path = string("path").unwrap_or(Err(FieldError::MissingPath));
        let from = string("from").unwrap_or(Err(FieldError::MissingFrom));
        let value = fields
            .get("value")
            .map(|f| f.as_ref().map_or(Node::Null, Field::node));
        Operation {
            kind,
            path,
            from,
            value,
        }
    }

    /// The value to add or replace with: null when absent.
    fn value_or_null(&self) -> Node {
        self.value.clone().unwrap_or(Node::Null)
    }
}

/// A path token with `~1` and `~0` decoded, left to right; any other `~` stays.
fn decode_token(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.peek() {
                Some('1') => {
                    chars.next();
                    out.push('/');
                    continue;
                }
                Some('0') => {
                    chars.next();
                    out.push('~');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// An array index as Go's `strconv.Atoi` reads it: an optional sign and decimal digits.
fn atoi(key: &str) -> Result<i64, AtoiError> {
    let digits = key.strip_prefix(['+', '-']).unwrap_or(key);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AtoiError::Syntax {
            key: key.to_string(),
        });
    }
    key.trim_start_matches('+')
        .parse()
        .map_err(|_| AtoiError::Range {
            key: key.to_string(),
        })
}

fn invalid_index(index: i64) -> AccessError {
    AccessError::InvalidIndex { index }
}

/// Resolves a possibly negative index against `len` elements (`len` is one more than the
/// array's length for insertion). `None` when out of range.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { index + len } else { index };
    usize::try_from(index).ok().filter(|&i| (i as i64) < len)
}

/// The position of the existing element `key` of an array of `len` elements.
fn array_index(key: &str, len: usize) -> Result<usize, AccessError> {
    let index = atoi(key)?;
    resolve_index(index, len).ok_or_else(|| invalid_index(index))
}

/// The element `key` of an array, as the library reads it.
fn array_get<'a>(items: &'a [Node], key: &str) -> Result<&'a Node, AccessError> {
    let at = array_index(key, items.len())?;
    items.get(at).ok_or_else(|| invalid_index(at as i64))
}

/// The member or element `key` of a container; a missing member is null.
fn container_get<'a>(container: &'a Node, key: &str) -> Result<&'a Node, AccessError> {
    match container {
        Node::Object(map) => Ok(map.get(key).unwrap_or(&Node::Null)),
        Node::Array(items) => array_get(items, key),
        _ => Ok(&Node::Null),
    }
}

/// Adds `value` at `key`: an object member is set; an array gets an element inserted (`-`
/// appends, negative indices count from the end of the longer array).
fn container_add(container: &mut Node, key: &str, value: Node) -> Result<(), AccessError> {
    match container {
        Node::Object(map) => {
            map.insert(key.to_string(), value);
            Ok(())
        }
        Node::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = atoi(key).map_err(|source| AccessError::NotAnIndex {
                key: key.to_string(),
                source,
            })?;
            let at = resolve_index(index, items.len() + 1).ok_or_else(|| invalid_index(index))?;
            items.insert(at, value);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Removes and returns the member or element `key`.
fn container_remove(container: &mut Node, key: &str) -> Result<Node, AccessError> {
    match container {
        Node::Object(map) => map.remove(key).ok_or_else(|| AccessError::NonexistentKey {
            key: key.to_string(),
        }),
        Node::Array(items) => {
            let at = array_index(key, items.len())?;
            Ok(items.remove(at))
        }
        _ => Ok(Node::Null),
    }
}

/// The container a path's last token is looked up in (expanded), and that token decoded.
/// Every token but the last must lead to an object or array; the first token (before the
/// first `/`) is ignored. `None` when the path has no `/` or leads nowhere.
fn find_container<'a>(root: &'a mut Node, path: &str) -> Option<(&'a mut Node, String)> {
    let mut tokens: Vec<&str> = path.split('/').collect();
    if tokens.len() < 2 {
        return None;
    }
    let last = tokens.pop()?;
    let mut node = root;
    node.expand();
    for token in &tokens[1..] {
        let key = decode_token(token);
        let next = match node {
            Node::Object(map) => map.get_mut(&key)?,
            Node::Array(items) => {
                let at = array_index(&key, items.len()).ok()?;
                items.get_mut(at)?
            }
            _ => return None,
        };
        if !next.is_container() {
            return None;
        }
        next.expand();
        node = next;
    }
    Some((node, decode_token(last)))
}

/// The value a path points at, if any (for estimating what an operation adds).
fn lookup<'a>(root: &'a mut Node, path: &str) -> Option<&'a Node> {
    let (container, key) = find_container(root, path)?;
    container_get(container, &key).ok()
}

fn path_of(op: &Operation, name: &'static str, strict_message: bool) -> Result<String, OpError> {
    op.path.clone().map_err(|source| {
        if strict_message {
            OpError::PathMissing { op: name }
        } else {
            OpError::DecodePath { op: name, source }
        }
    })
}

fn from_of(op: &Operation, name: &'static str) -> Result<String, OpError> {
    op.from
        .clone()
        .map_err(|source| OpError::DecodeFrom { op: name, source })
}

fn op_add(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let path = path_of(op, "add", true)?;
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::MissingPathQuoted { op: "add", path });
    };
    container_add(container, &key, op.value_or_null()).map_err(|source| OpError::AtPath {
        op: "add",
        path,
        source,
    })
}

fn op_remove(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let path = path_of(op, "remove", true)?;
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::MissingPathQuoted { op: "remove", path });
    };
    container_remove(container, &key)
        .map(|_| ())
        .map_err(|source| OpError::AtPath {
            op: "remove",
            path,
            source,
        })
}

fn op_replace(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let path = path_of(op, "replace", false)?;
    if path.is_empty() {
        let value = op.value_or_null();
        if !value.is_container() {
            return Err(OpError::ReplaceRootWithScalar);
        }
        *root = value;
        return Ok(());
    }
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::MissingPath {
            op: "replace",
            path,
        });
    };
    match container {
        Node::Array(items) => {
            let at = array_index(&key, items.len()).ok();
            let Some(slot) = at.and_then(|i| items.get_mut(i)) else {
                return Err(OpError::MissingKey {
                    op: "replace",
                    path,
                });
            };
            *slot = op.value_or_null();
        }
        Node::Object(map) => {
            map.insert(key, op.value_or_null());
        }
        _ => {}
    }
    Ok(())
}

fn op_move(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let from = from_of(op, "move")?;
    let Some((container, key)) = find_container(root, &from) else {
        return Err(OpError::MissingFrom { op: "move", from });
    };
    let value = container_remove(container, &key).map_err(|source| OpError::AtPath {
        op: "move",
        path: key.clone(),
        source,
    })?;
    let path = path_of(op, "move", false)?;
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::MissingDestination { op: "move", path });
    };
    container_add(container, &key, value).map_err(|source| OpError::AtPath {
        op: "move",
        path,
        source,
    })
}

fn op_test(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let path = path_of(op, "test", false)?;
    if path.is_empty() {
        return if op.value.as_ref().is_some_and(|v| same(root, v)) {
            Ok(())
        } else {
            Err(OpError::TestFailed { path })
        };
    }
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::TestMissingPath { op: "test", path });
    };
    let found = match container_get(container, &key) {
        Ok(found) => found,
        Err(source) => {
            return Err(OpError::AtPath {
                op: "test",
                path,
                source,
            });
        }
    };
    let passed = match (found, &op.value) {
        (Node::Null, None | Some(Node::Null)) => true,
        (_, None) => false,
        (found, Some(expected)) => same(found, expected),
    };
    if passed {
        Ok(())
    } else {
        Err(OpError::TestFailed { path })
    }
}

fn op_copy(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    let from = from_of(op, "copy")?;
    let Some((container, key)) = find_container(root, &from) else {
        return Err(OpError::MissingFrom { op: "copy", from });
    };
    let value = match container_get(container, &key) {
        Ok(value) => value.deep_copy(),
        Err(source) => {
            return Err(OpError::AtFrom {
                op: "copy",
                from,
                source,
            });
        }
    };
    let path = path_of(op, "copy", true)?;
    let Some((container, key)) = find_container(root, &path) else {
        return Err(OpError::MissingDestination { op: "copy", path });
    };
    container_add(container, &key, value).map_err(|source| OpError::CopyAdd { source })
}

/// Applies one operation to the document `root`.
fn apply_op(root: &mut Node, op: &Operation) -> Result<(), OpError> {
    match op.kind.as_str() {
        "add" => op_add(root, op),
        "remove" => op_remove(root, op),
        "replace" => op_replace(root, op),
        "move" => op_move(root, op),
        "test" => op_test(root, op),
        "copy" => op_copy(root, op),
        other => Err(OpError::UnknownKind {
            kind: other.to_string(),
        }),
    }
}

/// Levels a JSON pointer descends.
fn pointer_depth(pointer: &str) -> usize {
    pointer.matches('/').count()
}

/// Refuses an operation that would make the document larger than `budget` bytes or deeper
/// than the YAML reader's nesting bound; `size` is the document's running estimate.
fn check_growth(
    doc: &mut Node,
    op: &Operation,
    index: usize,
    size: &mut usize,
    budget: usize,
) -> Result<(), ApplyError> {
    let Ok(path) = &op.path else {
        return Ok(());
    };
    let added = match op.kind.as_str() {
        "add" | "replace" => Some(op.value.as_ref().map_or((0, 0), Node::extent)),
        "copy" => op
            .from
            .as_ref()
            .ok()
            .and_then(|from| lookup(doc, from))
            .map(Node::extent),
        // A move adds nothing, but may place a subtree deeper.
        "move" => op
            .from
            .as_ref()
            .ok()
            .and_then(|from| lookup(doc, from))
            .map(|n| (0, n.extent().1)),
        _ => None,
    };
    let Some((bytes, depth)) = added else {
        return Ok(());
    };
    if pointer_depth(path) + depth > goyaml::MAX_DEPTH {
        return Err(ApplyError::TooDeep {
            index,
            op: op.kind.clone(),
            max_depth: goyaml::MAX_DEPTH,
        });
    }
    *size = size.saturating_add(bytes);
    if *size > budget {
        return Err(ApplyError::TooLarge {
            index,
            op: op.kind.clone(),
            mib: budget >> 20,
        });
    }
    Ok(())
}

/// Applies already parsed operations to `target`; `file` names the patch in errors. The
/// patched document may grow to twice its size or [`MIN_PATCHED_BYTES`], whichever is more,
/// checked before each operation; on any error the target is left as it was. Returns how
/// many bytes (estimated) the operations added.
pub fn apply_ops(
    target: &mut Object,
    ops: &[Operation],
    file: &str,
) -> Result<usize, Json6902Error> {
    let fail = |source: ApplyError| Json6902Error::Apply {
        patch: file.to_string(),
        source: Box::new(source),
    };
    let mut doc = Node::from_doc(Value::Object(target.clone()));
    let (mut size, _) = doc.extent();
    doc.expand();
    let initial = size;
    let budget = MIN_PATCHED_BYTES.max(size.saturating_mul(2));
    for (index, op) in ops.iter().enumerate() {
        check_growth(&mut doc, op, index, &mut size, budget)
            .and_then(|()| {
                apply_op(&mut doc, op).map_err(|source| ApplyError::Operation { index, source })
            })
            .map_err(fail)?;
    }
    if matches!(doc, Node::Array(_) | Node::Doc(Value::Array(_))) {
        return Err(fail(ApplyError::ArrayDocument));
    }
    match doc.into_value().map_err(|e| fail(e.into()))? {
        Value::Object(map) => {
            // Go's json.Marshal writes map keys sorted: expanded maps are, the others are
            // sorted when the build's output is.
            *target = map;
            Ok(size.saturating_sub(initial))
        }
        _ => Err(fail(ApplyError::NotAnObject)),
    }
}

/// Applies the JSON patch `ops_text` (JSON or YAML) to `target`; `file` names the patch
/// in errors.
pub fn apply_json6902(
    target: &mut Object,
    ops_text: &str,
    file: &str,
) -> Result<(), Json6902Error> {
    let ops = parse_ops(ops_text).map_err(|source| Json6902Error::Parse {
        patch: file.to_string(),
        source,
    })?;
    apply_ops(target, &ops, file).map(|_| ())
}

#[cfg(test)]
mod tests;
