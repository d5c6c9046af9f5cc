//! The values a JSON patch works on, held as kustomize's json-patch library holds them:
//! scalars as JSON text (which `test` compares byte for byte), and the document expanded
//! lazily, one level at a time along the paths the operations follow, so that a deep
//! document is never walked recursively more than once (to read the result back).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Number, Value};

use super::ScalarError;

/// What one node of a document is counted as, besides its text.
const NODE_OVERHEAD: usize = 48;

/// A value of a patched document or of an operation.
#[derive(Clone, Debug)]
pub enum Node {
    /// JSON null (or a missing value).
    Null,
    /// A string, number or boolean as compact JSON text, as written in a JSON patch.
    Scalar(String),
    /// An object; keys in Go's `json.Marshal` order.
    Object(BTreeMap<String, Node>),
    /// An array.
    Array(Vec<Node>),
    /// A value not yet expanded (never null): part of the document, or written in YAML.
    /// Its scalars stand for the JSON text Go writes for them.
    Doc(Value),
}

impl Node {
    /// A document value, or a value of an operation written in YAML.
    pub fn from_doc(value: Value) -> Node {
        match value {
            Value::Null => Node::Null,
            value => Node::Doc(value),
        }
    }

    /// A value from valid JSON text, scalars kept as written. A map repeating a key keeps
    /// the last, as Go's decoder does.
    pub fn from_raw(text: &str) -> Node {
        let text = text.trim();
        match text.as_bytes().first() {
            None | Some(b'n') => Node::Null,
            Some(b'{') => {
                let map: BTreeMap<String, Box<RawValue>> =
                    serde_json::from_str(text).unwrap_or_default();
                let mut out = BTreeMap::new();
                for (key, raw) in map {
                    out.insert(key, Node::from_raw(raw.get()));
                }
                Node::Object(out)
            }
            Some(b'[') => {
                let items: Vec<Box<RawValue>> = serde_json::from_str(text).unwrap_or_default();
                let mut out = Vec::with_capacity(items.len());
                for raw in &items {
                    out.push(Node::from_raw(raw.get()));
                }
                Node::Array(out)
            }
            Some(_) => Node::Scalar(text.to_string()),
        }
    }

    /// Expands a document object or array one level (its children stay unexpanded).
    pub fn expand(&mut self) {
        let Node::Doc(value) = self else {
            return;
        };
        match std::mem::take(value) {
            Value::Object(map) => {
                let mut out = BTreeMap::new();
                for (key, child) in map {
                    out.insert(key, Node::from_doc(child));
                }
                *self = Node::Object(out);
            }
            Value::Array(items) => {
                *self = Node::Array(items.into_iter().map(Node::from_doc).collect())
            }
            scalar => *self = Node::from_doc(scalar),
        }
    }

    /// Whether this is an object or an array (once expanded).
    pub fn is_container(&self) -> bool {
        matches!(
            self,
            Node::Object(_) | Node::Array(_) | Node::Doc(Value::Object(_) | Value::Array(_))
        )
    }

    /// A copy as the library makes it: through `json.Marshal`, which escapes `<`, `>`, `&`
    /// (and U+2028, U+2029) in strings written raw in the patch.
    pub fn deep_copy(&self) -> Node {
        match self {
            Node::Null => Node::Null,
            Node::Scalar(text) => Node::Scalar(html_escape(text)),
            Node::Doc(value) => Node::Doc(value.clone()),
            Node::Array(items) => Node::Array(items.iter().map(Node::deep_copy).collect()),
            Node::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.deep_copy()))
                    .collect(),
            ),
        }
    }

    /// The value as kustomize reads the patched JSON back: numbers through float64.
    pub fn into_value(self) -> Result<Value, ScalarError> {
        Ok(match self {
            Node::Null => Value::Null,
            Node::Scalar(text) => scalar_value(&text)?,
            Node::Doc(mut value) => {
                through_float64(&mut value);
                value
            }
            Node::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(item.into_value()?);
                }
                Value::Array(out)
            }
            Node::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (key, item) in map {
                    out.insert(key, item.into_value()?);
                }
                Value::Object(out)
            }
        })
    }

    /// Bytes (text plus a per-node overhead) and depth.
    pub fn extent(&self) -> (usize, usize) {
        match self {
            Node::Doc(value) => value_extent(value),
            Node::Array(items) => items.iter().fold((NODE_OVERHEAD, 1), |(b, d), item| {
                let (ib, id) = item.extent();
                (b.saturating_add(ib), d.max(id + 1))
            }),
            Node::Object(map) => map.iter().fold((NODE_OVERHEAD, 1), |(b, d), (k, item)| {
                let (ib, id) = item.extent();
                (b.saturating_add(ib).saturating_add(k.len()), d.max(id + 1))
            }),
            Node::Scalar(text) => (NODE_OVERHEAD + text.len(), 0),
            Node::Null => (NODE_OVERHEAD, 0),
        }
    }
}

/// Bytes (text plus a per-node overhead) and depth of a document value. Documents never
/// nest deeper than the YAML reader's bound plus what a patch adds within it.
pub fn value_extent(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => {
            let (mut bytes, mut depth) = (NODE_OVERHEAD, 1);
            for item in items {
                let (b, d) = value_extent(item);
                bytes = bytes.saturating_add(b);
                depth = depth.max(d + 1);
            }
            (bytes, depth)
        }
        Value::Object(map) => {
            let (mut bytes, mut depth) = (NODE_OVERHEAD, 1);
            for (key, item) in map {
                let (b, d) = value_extent(item);
                bytes = bytes.saturating_add(b).saturating_add(key.len());
                depth = depth.max(d + 1);
            }
            (bytes, depth)
        }
        Value::String(text) => (NODE_OVERHEAD + text.len(), 0),
        _ => (NODE_OVERHEAD, 0),
    }
}

/// A node or a document value, borrowed, for comparisons.
#[derive(Clone, Copy)]
enum Ref<'a> {
    Node(&'a Node),
    Value(&'a Value),
}

/// What a [`Ref`] is, one level deep.
enum Shape<'a> {
    Null,
    Scalar(Cow<'a, str>),
    Object(Vec<(&'a str, Ref<'a>)>),
    Array(Vec<Ref<'a>>),
}

impl<'a> Ref<'a> {
    fn shape(self) -> Shape<'a> {
        match self {
            Ref::Node(Node::Doc(value)) | Ref::Value(value) => match value {
                Value::Null => Shape::Null,
                Value::Object(map) => Shape::Object(
                    map.iter()
                        .map(|(k, v)| (k.as_str(), Ref::Value(v)))
                        .collect(),
                ),
                Value::Array(items) => Shape::Array(items.iter().map(Ref::Value).collect()),
                scalar => Shape::Scalar(Cow::Owned(go_json_text(scalar))),
            },
            Ref::Node(Node::Null) => Shape::Null,
            Ref::Node(Node::Scalar(text)) => Shape::Scalar(Cow::Borrowed(text)),
            Ref::Node(Node::Object(map)) => Shape::Object(
                map.iter()
                    .map(|(k, v)| (k.as_str(), Ref::Node(v)))
                    .collect(),
            ),
            Ref::Node(Node::Array(items)) => Shape::Array(items.iter().map(Ref::Node).collect()),
        }
    }
}

/// Whether two values are equal as the library's `test` finds them: the same structure,
/// scalars of the same JSON text.
pub fn same(a: &Node, b: &Node) -> bool {
    same_ref(Ref::Node(a), Ref::Node(b))
}

fn same_ref(a: Ref<'_>, b: Ref<'_>) -> bool {
    match (a.shape(), b.shape()) {
        (Shape::Null, Shape::Null) => true,
        (Shape::Scalar(x), Shape::Scalar(y)) => x == y,
        (Shape::Array(x), Shape::Array(y)) => {
            x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| same_ref(*p, *q))
        }
        (Shape::Object(x), Shape::Object(y)) => {
            // Keys are unique on both sides: same size and every key found equal.
            let y: BTreeMap<&str, Ref<'_>> = y.into_iter().collect();
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| same_ref(*value, *other)))
        }
        _ => false,
    }
}

/// A document scalar as Go's `json.Marshal` writes it (strings HTML-safe).
fn go_json_text(scalar: &Value) -> String {
    match scalar {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => crate::hash::go_number(n),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut text = String::with_capacity(s.len() + 2);
            goyaml::go_json::write_string(&mut text, s);
            text
        }
        _ => "null".to_string(),
    }
}

/// Escapes what Go's `json.Marshal` escapes when it re-writes raw JSON.
fn html_escape(text: &str) -> String {
    if !text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 10);
    for c in text.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// A scalar's JSON text read back as kustomize does: a number becomes a float64.
fn scalar_value(text: &str) -> Result<Value, ScalarError> {
    match text {
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        "null" => return Ok(Value::Null),
        _ => {}
    }
    if text.starts_with('"') {
        return Ok(serde_json::from_str(text)?);
    }
    let float: f64 = text
        .parse()
        .ok()
        .filter(|f: &f64| f.is_finite())
        .ok_or_else(|| ScalarError::Number {
            text: text.to_string(),
        })?;
    Ok(Value::Number(float_number(float)))
}

/// Every number of a document value as it comes back from float64.
fn through_float64(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(float) = n.as_f64() {
                *n = float_number(float);
            }
        }
        Value::Array(items) => {
            for item in items {
                through_float64(item);
            }
        }
        Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                through_float64(item);
            }
        }
        _ => {}
    }
}

/// A float64 as a JSON number: a whole value that fits an integer becomes the integer Go
/// prints for it (its shortest digits: 1.2345678901234567e19 is 12345678901234567000).
pub fn float_number(float: f64) -> Number {
    if float.fract() == 0.0 {
        // Display writes the shortest round-trip digits, without exponent.
        let digits = format!("{float}");
        if let Ok(int) = digits.parse::<i64>() {
            return Number::from(int);
        }
        if let Ok(int) = digits.parse::<u64>() {
            return Number::from(int);
        }
    }
    Number::from_f64(float).unwrap_or_else(|| Number::from(0))
}
