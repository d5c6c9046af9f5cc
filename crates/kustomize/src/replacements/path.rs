//! Field paths of replacements: splitting `a.b.[k=v].c` into segments, reading one value
//! (sources), and walking every match, creating missing parts on request (targets).
//!
//! Segments are map keys, list indexes (`0`), list matchers (`[key=regex]` or `[=regex]`)
//! and `*` (every list element). A string field met with path left over is read as
//! YAML/JSON text; the walk continues inside it and the text is rewritten afterwards.

use regex::Regex;
use serde_json::{Map, Value};

use super::ValueError;
use super::scalar::{go_json, resolve_plain, scalar_text};
use crate::goregex::GoRegexError;

/// Splits a field path on dots. `\.` escapes a dot; `[...]` keeps its dots, and loses its
/// brackets unless it is a `[key=value]` list matcher.
pub fn split_path(path: &str) -> Vec<String> {
    let mut pieces: Vec<&str> = path.split('.').collect();
    if pieces.len() > 1 && pieces[0].is_empty() {
        pieces.remove(0);
    }
    let mut unescaped: Vec<String> = Vec::new();
    for piece in pieces {
        match unescaped.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('.');
                last.push_str(piece);
            }
            _ => unescaped.push(piece.to_string()),
        }
    }
    let mut result = Vec::new();
    let mut iter = unescaped.into_iter();
    while let Some(elem) = iter.next() {
        if elem.starts_with('[') && !elem.ends_with(']') {
            let mut bracketed = vec![elem];
            for next in iter.by_ref() {
                let done = next.ends_with(']');
                bracketed.push(next);
                if done {
                    break;
                }
            }
            let joined = bracketed.join(".");
            if joined.contains('=') {
                result.push(joined);
            } else {
                result.push(joined.trim_matches(['[', ']']).to_string());
            }
        } else {
            result.push(elem);
        }
    }
    result
}

/// Go's `strconv.Atoi`: optional sign, decimal digits, 64-bit range.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// A non-negative list index.
fn index_segment(segment: &str) -> Option<usize> {
    go_atoi(segment)
        .filter(|i| *i >= 0)
        .and_then(|i| usize::try_from(i).ok())
}

fn is_list_matcher(segment: &str) -> bool {
    segment.starts_with('[') && segment.ends_with(']')
}

/// `[key=value]` into `(key, value)`; `[=value]` has an empty key.
fn split_matcher(segment: &str) -> Result<(&str, &str), PathError> {
    let inner = segment.strip_suffix(']').unwrap_or(segment);
    let inner = inner.strip_prefix('[').unwrap_or(inner);
    inner.split_once('=').ok_or_else(|| PathError::BadMatcher {
        segment: segment.to_string(),
    })
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "a map",
        Value::Array(_) => "a list",
        Value::Null => "null",
        _ => "a scalar",
    }
}

fn wrong_kind(segment: &str, expected: &'static str, found: &Value) -> PathError {
    PathError::WrongKind {
        segment: segment.to_string(),
        expected,
        found: kind_name(found),
    }
}

/// Reads the single value at `segments` (list matchers compare exactly and take the first
/// match; `-` is the last element; `*` is refused). `Ok(None)` when a part is missing.
pub fn lookup<'a>(node: &'a Value, segments: &[String]) -> Result<Option<&'a Value>, PathError> {
    let mut current = node;
    for segment in segments.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let next = if let Some(i) = go_atoi(segment) {
            if i < 0 {
                return Err(PathError::NegativeIndex { index: i });
            }
            let items = list_items(current, segment)?;
            usize::try_from(i).ok().and_then(|i| items.get(i))
        } else if segment == "-" {
            list_items(current, segment)?.last()
        } else if segment == "*" {
            return Err(PathError::Wildcard);
        } else if is_list_matcher(segment) {
            let (key, value) = split_matcher(segment)?;
            list_items(current, segment)?
                .iter()
                .find(|item| exact_match(item, key, value))
        } else {
            match current {
                Value::Null => None,
                Value::Object(map) => map.get(segment),
                other => return Err(wrong_kind(segment, "a map", other)),
            }
        };
        match next {
            Some(value) => current = value,
            None => return Ok(None),
        }
    }
    Ok(Some(current))
}

fn list_items<'a>(node: &'a Value, segment: &str) -> Result<&'a [Value], PathError> {
    match node {
        Value::Null => Ok(&[]),
        Value::Array(items) => Ok(items),
        other => Err(wrong_kind(segment, "a list", other)),
    }
}

/// The text a node is compared by: a scalar's text, "" for maps and lists.
fn node_text(value: &Value) -> String {
    scalar_text(value).unwrap_or_default()
}

fn exact_match(item: &Value, key: &str, value: &str) -> bool {
    if key.is_empty() {
        return node_text(item) == value;
    }
    match item {
        Value::Object(map) => map.get(key).is_some_and(|v| node_text(v) == value),
        _ => false,
    }
}

/// The kind of node created for a missing path part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A scalar, created empty and untyped (its type follows the text later set in it).
    Scalar,
    /// A map.
    Map,
    /// A list.
    List,
}

impl NodeKind {
    /// The kind of `value`.
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Object(_) => NodeKind::Map,
            Value::Array(_) => NodeKind::List,
            _ => NodeKind::Scalar,
        }
    }

    fn empty(self) -> Value {
        match self {
            NodeKind::Scalar => Value::Null,
            NodeKind::Map => Value::Object(Map::new()),
            NodeKind::List => Value::Array(Vec::new()),
        }
    }
}

/// Facts about a matched node handed to the visitor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leaf {
    /// The node was created by this walk: a scalar here has no type of its own yet.
    pub created: bool,
    /// The node lives inside structured text held by a string field.
    pub structured: bool,
}

/// Why a field path cannot be followed (or created).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A `[...]` segment without `=`.
    #[error("list matcher {segment:?} must have the form [field=value]")]
    BadMatcher {
        /// The segment.
        segment: String,
    },
    /// A segment applied to a node of the wrong kind.
    #[error("segment {segment:?} needs {expected}, found {found}")]
    WrongKind {
        /// The segment.
        segment: String,
        /// The kind of node it needs ("a map", "a list").
        expected: &'static str,
        /// The kind of node found.
        found: &'static str,
    },
    /// A negative list index in a source path.
    #[error("list index {index} cannot be negative")]
    NegativeIndex {
        /// The index.
        index: i64,
    },
    /// `*` in a source path.
    #[error("wildcard segment \"*\" is not allowed in a source field path")]
    Wildcard,
    /// A list index past the end of the list.
    #[error("index {index} specified but only {len} elements found")]
    IndexOutOfRange {
        /// The index.
        index: usize,
        /// The list's length.
        len: usize,
    },
    /// A list matcher's value is not a valid regular expression.
    #[error("invalid regex in list matcher {segment:?}: {}", .source.reason)]
    BadRegex {
        /// The segment.
        segment: String,
        /// The compiler's error.
        source: Box<GoRegexError>,
    },
    /// A segment after a string field whose text is not YAML or JSON.
    #[error("field {segment:?} holds text that is not YAML or JSON: {source}")]
    NotStructured {
        /// The string field's segment.
        segment: String,
        /// The parser's error.
        source: goyaml::YamlError,
    },
    /// The element created for a list matcher does not match it.
    #[error("the element created for {segment:?} does not match its own pattern")]
    CreatedMismatch {
        /// The segment.
        segment: String,
    },
}

/// Why a walk stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum WalkError {
    /// The path cannot be followed (or created).
    Path(PathError),
    /// The visitor refused a node.
    Visit(ValueError),
}

/// Called for every node a path matches.
pub type Visitor<'a> = dyn FnMut(&mut Value, Leaf) -> Result<(), ValueError> + 'a;

/// Walks `segments` from `node`, calling `visit` on every match; returns the number of
/// matches. With `create`, missing map keys, list elements for `[k=v]` matchers, and the
/// list element just past the end for an index are created; the final node is created of
/// kind `create`.
pub fn walk(
    node: &mut Value,
    segments: &[String],
    create: Option<NodeKind>,
    visit: &mut Visitor<'_>,
) -> Result<usize, WalkError> {
    Walker { create, visit }.walk(node, segments, Leaf::default())
}

struct Walker<'v, 'a> {
    create: Option<NodeKind>,
    visit: &'v mut Visitor<'a>,
}

impl Walker<'_, '_> {
    /// The kind of node to create for the part before `rest`.
    fn kind_before(&self, rest: &[String]) -> NodeKind {
        match rest.first() {
            None => self.create.unwrap_or(NodeKind::Scalar),
            Some(next) if is_list_matcher(next) || index_segment(next).is_some() => NodeKind::List,
            Some(_) => NodeKind::Map,
        }
    }

    fn walk(&mut self, node: &mut Value, path: &[String], leaf: Leaf) -> Result<usize, WalkError> {
        let Some((segment, rest)) = path.split_first() else {
            (self.visit)(node, leaf).map_err(WalkError::Visit)?;
            return Ok(1);
        };
        let inner = Leaf {
            created: false,
            structured: leaf.structured,
        };
        if let Some(index) = index_segment(segment) {
            self.index(node, segment, index, rest, inner)
        } else if is_list_matcher(segment) {
            self.matcher(node, segment, rest, inner)
        } else if segment == "*" {
            let mut count = 0;
            for item in self.list_mut(node, segment)? {
                count += self.walk(item, rest, inner)?;
            }
            Ok(count)
        } else {
            self.field(node, segment, rest, inner)
        }
    }

    /// The elements of a list; null counts as an empty list (made a real one when
    /// creating).
    fn list_mut<'n>(
        &self,
        node: &'n mut Value,
        segment: &str,
    ) -> Result<&'n mut Vec<Value>, WalkError> {
        if node.is_null() {
            *node = Value::Array(Vec::new());
        }
        match node {
            Value::Array(items) => Ok(items),
            other => Err(WalkError::Path(wrong_kind(segment, "a list", other))),
        }
    }

    fn index(
        &mut self,
        node: &mut Value,
        segment: &str,
        index: usize,
        rest: &[String],
        leaf: Leaf,
    ) -> Result<usize, WalkError> {
        if node.is_null() && self.create.is_none() {
            return Err(WalkError::Path(PathError::IndexOutOfRange {
                index,
                len: 0,
            }));
        }
        let kind = self.kind_before(rest);
        let creating = self.create.is_some();
        let items = self.list_mut(node, segment)?;
        let mut created = false;
        if creating && items.len() == index {
            items.push(kind.empty());
            created = true;
        }
        let len = items.len();
        let Some(item) = items.get_mut(index) else {
            return Err(WalkError::Path(PathError::IndexOutOfRange { index, len }));
        };
        self.walk(item, rest, Leaf { created, ..leaf })
    }

    fn matcher(
        &mut self,
        node: &mut Value,
        segment: &str,
        rest: &[String],
        leaf: Leaf,
    ) -> Result<usize, WalkError> {
        let (key, pattern) = split_matcher(segment).map_err(WalkError::Path)?;
        let (key, pattern) = (key.to_string(), pattern.to_string());
        let creating = self.create.is_some();
        if node.is_null() && !creating {
            return Ok(0);
        }
        let items = self.list_mut(node, segment)?;
        if items.is_empty() && !creating {
            return Ok(0);
        }
        let regex = crate::goregex::compile(&pattern).map_err(|source| {
            WalkError::Path(PathError::BadRegex {
                segment: segment.to_string(),
                source: Box::new(source),
            })
        })?;
        let mut count = 0;
        for item in items.iter_mut() {
            count += self.match_item(item, &key, &regex, rest, leaf)?;
        }
        if count > 0 || !creating {
            return Ok(count);
        }
        let new_item = if key.is_empty() {
            resolve_plain(&pattern)
        } else {
            let mut map = Map::new();
            map.insert(key.clone(), resolve_plain(&pattern));
            Value::Object(map)
        };
        items.push(new_item);
        let Some(item) = items.last_mut() else {
            return Ok(0);
        };
        let created = Leaf {
            created: true,
            ..leaf
        };
        match self.match_item(item, &key, &regex, rest, created)? {
            0 => Err(WalkError::Path(PathError::CreatedMismatch {
                segment: segment.to_string(),
            })),
            n => Ok(n),
        }
    }

    /// Matches one list element against `[key=regex]`; unanchored, as kustomize does.
    /// A primitive matcher (`[=regex]`) selects the element itself and ignores the rest
    /// of the path.
    fn match_item(
        &mut self,
        item: &mut Value,
        key: &str,
        regex: &Regex,
        rest: &[String],
        leaf: Leaf,
    ) -> Result<usize, WalkError> {
        if key.is_empty() {
            if regex.is_match(display_text(item).trim()) {
                (self.visit)(item, leaf).map_err(WalkError::Visit)?;
                return Ok(1);
            }
            return Ok(0);
        }
        let matched = match item {
            Value::Object(map) => map
                .get(key)
                .is_some_and(|v| regex.is_match(display_text(v).trim())),
            _ => false,
        };
        if matched {
            self.walk(item, rest, leaf)
        } else {
            Ok(0)
        }
    }

    fn field(
        &mut self,
        node: &mut Value,
        segment: &str,
        rest: &[String],
        leaf: Leaf,
    ) -> Result<usize, WalkError> {
        if node.is_null() {
            if self.create.is_none() {
                return Ok(0);
            }
            *node = Value::Object(Map::new());
        }
        let kind = self.kind_before(rest);
        let creating = self.create.is_some();
        let map = match node {
            Value::Object(map) => map,
            other => return Err(WalkError::Path(wrong_kind(segment, "a map", other))),
        };
        let missing = match map.get(segment) {
            None => true,
            Some(Value::Null) => !rest.is_empty(),
            Some(_) => false,
        };
        let mut created = false;
        if missing {
            if !creating {
                return Ok(0);
            }
            map.insert(segment.to_string(), kind.empty());
            created = true;
        }
        let Some(child) = map.get_mut(segment) else {
            return Ok(0);
        };
        if !rest.is_empty() && matches!(child, Value::String(_) | Value::Number(_) | Value::Bool(_))
        {
            return self.structured(child, segment, rest, leaf);
        }
        self.walk(child, rest, Leaf { created, ..leaf })
    }

    /// Continues the walk inside the YAML or JSON text held by a scalar field, and
    /// rewrites the text when something matched.
    fn structured(
        &mut self,
        field: &mut Value,
        segment: &str,
        rest: &[String],
        leaf: Leaf,
    ) -> Result<usize, WalkError> {
        let text = scalar_text(field).unwrap_or_default();
        let mut parsed = goyaml::parse_documents(&text)
            .map_err(|source| {
                WalkError::Path(PathError::NotStructured {
                    segment: segment.to_string(),
                    source,
                })
            })?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let inner = Leaf {
            structured: true,
            ..leaf
        };
        let count = self.walk(&mut parsed, rest, inner)?;
        if count > 0 {
            *field = Value::String(serialize_structured(&parsed, &text));
        }
        Ok(count)
    }
}

/// How kustomize prints a node when matching it against a list-matcher regex.
fn display_text(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Object(_) | Value::Array(_) => goyaml::to_yaml(value),
        other => node_text(other),
    }
}

/// Re-encodes structured text after a change: JSON (indented when the original was
/// multi-line and indented) when it started with `{` or `[`, YAML otherwise.
fn serialize_structured(value: &Value, original: &str) -> String {
    let trimmed = original.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let pretty = original.contains('\n') && original.contains("  ");
        go_json(value, pretty)
    } else {
        goyaml::to_yaml(value).trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn segs(path: &str) -> Vec<String> {
        split_path(path)
    }

    #[test]
    fn splits_paths() {
        assert_eq!(segs("a.b.c"), ["a", "b", "c"]);
        assert_eq!(segs(".a.b"), ["a", "b"]);
        assert_eq!(segs(r"data.config\.json.x"), ["data", "config.json", "x"]);
        assert_eq!(
            segs("metadata.annotations.[example.com/x-y]"),
            ["metadata", "annotations", "example.com/x-y"]
        );
        assert_eq!(
            segs("spec.list.[name=a.b.c].value"),
            ["spec", "list", "[name=a.b.c]", "value"]
        );
        assert_eq!(segs("a.[k=v].0.*"), ["a", "[k=v]", "0", "*"]);
        assert_eq!(segs(""), [""]);
    }

    #[test]
    fn lookup_reads_one_value() {
        let doc = json!({"spec": {"list": [
            {"name": "a", "v": 1}, {"name": "b", "v": 2}, {"name": "ab", "v": 3}]}});
        let get = |p: &str| lookup(&doc, &segs(p));
        assert_eq!(get("spec.list.1.v").unwrap(), Some(&json!(2)));
        assert_eq!(get("spec.list.[name=b].v").unwrap(), Some(&json!(2)));
        assert_eq!(get("spec.list.-.name").unwrap(), Some(&json!("ab")));
        assert_eq!(get("spec.list.[name=c].v").unwrap(), None);
        assert_eq!(get("spec.list.9").unwrap(), None);
        assert_eq!(get("spec.missing.x").unwrap(), None);
        assert_eq!(get(" spec . list.0.name").unwrap(), Some(&json!("a")));
        assert!(get("spec.list.*.v").is_err());
        assert!(get("spec.list.-1").is_err());
        assert!(get("spec.list.name").is_err());
        assert!(get("spec.list.0.name.x").is_err());
        assert!(get("spec.list.[name]").is_err());
    }

    fn set_all(doc: &mut Value, path: &str, create: Option<NodeKind>) -> Result<usize, WalkError> {
        walk(doc, &segs(path), create, &mut |node, leaf| {
            *node = json!({"set": true, "created": leaf.created});
            Ok(())
        })
    }

    #[test]
    fn walk_matches_wildcards_and_unanchored_matchers() {
        let mut doc = json!({"c": [
            {"name": "app", "env": [{"name": "X", "value": "1"}]},
            {"name": "sidecar", "env": [{"name": "Y"}]},
            {"name": "myapp2"}]});
        assert_eq!(set_all(&mut doc, "c.*.env.[name=X].value", None), Ok(1));
        assert_eq!(doc["c"][0]["env"][0]["value"]["set"], json!(true));
        assert_eq!(set_all(&mut doc, "c.[name=app].name", None), Ok(2));
        assert_eq!(doc["c"][2]["name"]["created"], json!(false));
        assert_eq!(set_all(&mut doc, "c.[name=nomatch].x", None), Ok(0));
        assert_eq!(set_all(&mut doc, "c.*.missing", None), Ok(0));
    }

    #[test]
    fn walk_creates_missing_parts() {
        let mut doc = json!({"spec": {"p": [{"a": 1}, {"a": 2}]}});
        assert_eq!(
            set_all(&mut doc, "spec.p.2.m.x", Some(NodeKind::Scalar)),
            Ok(1)
        );
        assert_eq!(doc["spec"]["p"][2]["m"]["x"]["created"], json!(true));
        assert_eq!(
            set_all(&mut doc, "spec.tls.0.hosts.0", Some(NodeKind::Scalar)),
            Ok(1)
        );
        assert!(doc["spec"]["tls"][0]["hosts"][0].is_object());
        assert_eq!(
            set_all(&mut doc, "spec.q.5", Some(NodeKind::Scalar)),
            Err(WalkError::Path(PathError::IndexOutOfRange {
                index: 5,
                len: 0
            }))
        );
        let mut doc = json!({"env": [{"name": "A"}]});
        assert_eq!(
            set_all(&mut doc, "env.[name=B].value", Some(NodeKind::Scalar)),
            Ok(1)
        );
        assert_eq!(doc["env"][1]["name"], json!("B"));
        assert_eq!(doc["env"][1]["value"]["created"], json!(true));
    }

    #[test]
    fn walk_refuses_wrong_kinds() {
        let mut doc = json!({"a": {"b": 1}, "l": [1]});
        assert!(matches!(
            set_all(&mut doc, "a.*", None),
            Err(WalkError::Path(_))
        ));
        assert!(matches!(
            set_all(&mut doc, "l.x", None),
            Err(WalkError::Path(_))
        ));
        assert!(matches!(
            set_all(&mut doc, "a.0", None),
            Err(WalkError::Path(_))
        ));
    }

    #[test]
    fn walk_enters_structured_text() {
        let mut doc = json!({"data": {
            "c.json": "{\n  \"b\": 1,\n  \"a\": {\"x\": \"old\"}\n}",
            "inline": "{\"k\": {\"v\": \"old\"}}",
            "c.yaml": "top:\n  key: old\n"}});
        let mut visit = |node: &mut Value, leaf: Leaf| {
            assert!(leaf.structured);
            *node = json!("new");
            Ok(())
        };
        assert_eq!(
            walk(&mut doc, &segs(r"data.c\.json.a.x"), None, &mut visit),
            Ok(1)
        );
        assert_eq!(
            doc["data"]["c.json"],
            json!("{\n  \"a\": {\n    \"x\": \"new\"\n  },\n  \"b\": 1\n}")
        );
        assert_eq!(
            walk(&mut doc, &segs("data.inline.k.v"), None, &mut visit),
            Ok(1)
        );
        assert_eq!(doc["data"]["inline"], json!("{\"k\":{\"v\":\"new\"}}"));
        assert_eq!(
            walk(&mut doc, &segs(r"data.c\.yaml.top.key"), None, &mut visit),
            Ok(1)
        );
        let reparsed = goyaml::parse_documents(doc["data"]["c.yaml"].as_str().unwrap()).unwrap();
        assert_eq!(reparsed[0], json!({"top": {"key": "new"}}));
        assert!(matches!(
            walk(&mut doc, &segs(r"data.inline.k.v.deeper"), None, &mut visit),
            Err(WalkError::Path(_))
        ));
    }
}
