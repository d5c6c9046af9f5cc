//! YAML text to JSON values, resolving scalars like go-yaml v3 and expanding anchors, aliases
//! and `<<` merge keys like kyaml's `DeAnchor`.

use std::borrow::Cow;

use granit_parser::{Event, Options, Parser, ScalarStyle, ScanError, Span, Tag};
use serde_json::{Map, Value};

use super::YamlError;
use super::block;
use super::scalar::{Plain, resolve_plain, resolve_plain_yaml11};
use super::timestamp::parse_go_timestamp;

/// Upper bound on nodes copied by alias expansion in one stream (guards against "billion
/// laughs" documents).
const MAX_ALIAS_NODES: usize = 1_000_000;

/// Upper bound on the bytes alias expansion copies in one stream: the text of every copied
/// scalar and key plus `NODE_OVERHEAD` per copied node. A million-fold expansion of a small
/// anchor, or a few copies of a large one, is refused before it is built.
pub const MAX_ALIAS_BYTES: usize = 32 << 20;

/// What one copied node is counted as, besides its text (roughly its size in memory).
const NODE_OVERHEAD: usize = 48;

/// How deep collections may nest, counting the nodes that aliases bring in: the engine walks
/// values recursively, and this bound keeps every such walk within a small thread stack. Real
/// manifests (CRD schemas included) nest a few dozen levels; serde_json's own reader stops at
/// the same depth.
pub const MAX_DEPTH: usize = 128;

/// What a repeated key in one map means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DuplicateKeys {
    /// An error (kyaml, which reads resources).
    #[default]
    Error,
    /// The last value wins (sigs.k8s.io/yaml, which reads kustomization files).
    LastWins,
}

/// Which go-yaml resolves plain scalars, which decides first of all which words are booleans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Booleans {
    /// go-yaml v3, which kustomize reads with: `true`/`false` only; timestamps become Go's
    /// RFC 3339 text.
    #[default]
    Yaml12,
    /// go-yaml v2, which reads Flux's substituted text: also `yes`/`no`/`on`/`off`/`y`/`n`;
    /// timestamps stay as written.
    Yaml11,
}

impl Booleans {
    /// A plain scalar resolved by go-yaml v3 (YAML 1.2 keywords) or v2 (YAML 1.1).
    fn resolve(self, text: &str) -> Plain {
        match self {
            Booleans::Yaml12 => resolve_plain(text),
            Booleans::Yaml11 => resolve_plain_yaml11(text),
        }
    }
}

const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// Which Go program's reading to follow.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reading {
    pub(super) duplicate_keys: DuplicateKeys,
    pub(super) booleans: Booleans,
    /// Whether values come out as kustomize prints what kyaml read: after go-yaml v3 has
    /// written the node tree and read it back (see [`block::through_kyaml`]).
    pub(super) kyaml_output: bool,
}

/// Parses every document of `text`; documents that are empty or null are dropped.
pub(super) fn parse_documents(text: &str, reading: Reading) -> Result<Vec<Value>, YamlError> {
    Ok(build(text, reading, false)?.docs)
}

/// Parses like [`parse_documents`], with each document's [`PlainText`]s.
pub(super) fn parse_documents_with_plain_texts(
    text: &str,
    reading: Reading,
) -> Result<Vec<(Value, Vec<PlainText>)>, YamlError> {
    let builder = build(text, reading, true)?;
    Ok(builder.docs.into_iter().zip(builder.doc_texts).collect())
}

fn build(text: &str, reading: Reading, record_texts: bool) -> Result<Builder, YamlError> {
    let mut options = Options::default();
    options.emit_comments = false;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut builder = Builder {
        duplicate_keys: reading.duplicate_keys,
        booleans: reading.booleans,
        texts: record_texts.then(Vec::new),
        ..Builder::default()
    };
    for event in parser {
        let (event, span) = event.map_err(scan_error)?;
        let event = match event {
            Event::Scalar(value, style, anchor, tag)
                if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) =>
            {
                let folded = style == ScalarStyle::Folded && reading.kyaml_output;
                let value = block_scalar(value, &span, text, folded, builder.expecting_key());
                Event::Scalar(value, style, anchor, tag)
            }
            other => other,
        };
        builder.event(event, &span)?;
    }
    Ok(builder)
}

/// A block scalar's value as go-yaml v3 reads it, and, for a folded one that kustomize prints
/// (`kyaml_folded`), as it comes out of kyaml's write-and-read-back.
fn block_scalar<'a>(
    value: Cow<'a, str>,
    span: &Span,
    text: &str,
    kyaml_folded: bool,
    is_key: bool,
) -> Cow<'a, str> {
    let value = block::at_end_of_input(value, span, text);
    if !kyaml_folded {
        return value;
    }
    match block::through_kyaml(&value, is_key) {
        Cow::Owned(changed) => Cow::Owned(changed),
        Cow::Borrowed(_) => value,
    }
}

fn scan_error(e: ScanError) -> YamlError {
    let mark = e.marker();
    let info = e.info();
    let what = if info.contains("recursion limit") {
        format!("collections nested too deeply ({info})")
    } else {
        info.to_string()
    };
    YamlError(format!(
        "line {}, column {}: {what}",
        mark.line(),
        mark.col() + 1,
    ))
}

fn err_at(span: &Span, msg: impl std::fmt::Display) -> YamlError {
    YamlError(format!(
        "line {}, column {}: {msg}",
        span.start.line(),
        span.start.col() + 1
    ))
}

/// One step of a path into a document: a map key or a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    /// A field of a map.
    Key(String),
    /// An element of a list.
    Index(usize),
}

/// A plain scalar that was not read as the string it is written as (a null, a boolean, a
/// number, a timestamp), with its text: what kyaml's node holds, where the value lost it
/// (`~`, `0x1F`, `1.50`, or nothing at all for an empty value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainText {
    /// Where the scalar is, from the document's root.
    pub path: Vec<PathStep>,
    /// The scalar as written.
    pub text: String,
}

/// A map key waiting for its value.
enum Key {
    Normal(String, usize),
    Merge,
}

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        map: Map<String, Value>,
        /// Line of each key of `map`, in insertion order (for duplicate-key errors).
        lines: Vec<usize>,
        key: Option<Key>,
        merge: Option<(Value, usize)>,
        anchor: usize,
    },
}

#[derive(Default)]
struct Builder {
    duplicate_keys: DuplicateKeys,
    booleans: Booleans,
    docs: Vec<Value>,
    /// The plain texts of the document being read, when they are recorded.
    texts: Option<Vec<PlainText>>,
    /// The plain texts of each document of `docs`, when they are recorded.
    doc_texts: Vec<Vec<PlainText>>,
    stack: Vec<Frame>,
    /// Anchored values by anchor id (ids are small, dense and per stream).
    anchors: Vec<Option<(Value, Size)>>,
    /// Nodes copied by alias expansion so far.
    alias_nodes: usize,
    /// Bytes copied by alias expansion so far (see [`MAX_ALIAS_BYTES`]).
    alias_bytes: usize,
}

/// The extent of an anchored value.
#[derive(Clone, Copy, Debug, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
    /// Levels of collections (0 for a scalar).
    depth: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                if self.expecting_key() {
                    let key = scalar_key(text, style, tag.as_deref(), span);
                    return self.complete_key(key, anchor, span);
                }
                let value = scalar_value(&text, style, tag.as_deref(), span, self.booleans)?;
                if style == ScalarStyle::Plain
                    && tag.is_none()
                    && self.texts.is_some()
                    && value.as_str().is_none_or(|s| s != text)
                {
                    let path = self.path();
                    // The parser hands an empty value over as `~`; its span tells them apart.
                    let written = if span.start.index() == span.end.index() {
                        String::new()
                    } else {
                        text.into_owned()
                    };
                    if let Some(texts) = &mut self.texts {
                        texts.push(PlainText {
                            path,
                            text: written,
                        });
                    }
                }
                self.complete(value, anchor, span)
            }
            Event::Alias(id) => {
                let (value, size) = self
                    .anchors
                    .get(id)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| err_at(span, "unknown anchor"))?;
                self.alias_nodes = self.alias_nodes.saturating_add(size.nodes);
                self.alias_bytes = self.alias_bytes.saturating_add(size.bytes);
                if self.alias_nodes > MAX_ALIAS_NODES {
                    return Err(err_at(
                        span,
                        format!(
                            "document contains excessive aliasing: aliases expand to more than {MAX_ALIAS_NODES} nodes"
                        ),
                    ));
                }
                if self.alias_bytes > MAX_ALIAS_BYTES {
                    return Err(err_at(
                        span,
                        format!(
                            "document contains excessive aliasing: aliases expand to more than {} MiB",
                            MAX_ALIAS_BYTES >> 20
                        ),
                    ));
                }
                if self.stack.len() + size.depth > MAX_DEPTH {
                    return Err(too_deep(span));
                }
                let value = value.clone();
                if self.expecting_key() {
                    let key = key_from_value(&value, span)?;
                    return self.complete_key(Key::Normal(key, span.start.line()), 0, span);
                }
                self.complete(value, 0, span)
            }
            Event::SequenceStart(_, anchor, _) => {
                self.no_collection_key(span)?;
                self.no_deeper(span)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                });
                Ok(())
            }
            Event::MappingStart(_, anchor, _) => {
                self.no_collection_key(span)?;
                self.no_deeper(span)?;
                self.stack.push(Frame::Map {
                    map: Map::new(),
                    lines: Vec::new(),
                    key: None,
                    merge: None,
                    anchor,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(span),
            Event::DocumentStart(..) => {
                self.anchors.clear();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Where the value being read goes, from the document's root.
    fn path(&self) -> Vec<PathStep> {
        self.stack
            .iter()
            .map(|frame| match frame {
                Frame::Seq { items, .. } => PathStep::Index(items.len()),
                Frame::Map {
                    key: Some(Key::Normal(key, _)),
                    ..
                } => PathStep::Key(key.clone()),
                Frame::Map { .. } => PathStep::Key("<<".to_string()),
            })
            .collect()
    }

    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// Refuses one more level of nesting beyond [`MAX_DEPTH`].
    fn no_deeper(&self, span: &Span) -> Result<(), YamlError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(span));
        }
        Ok(())
    }

    fn no_collection_key(&self, span: &Span) -> Result<(), YamlError> {
        if self.expecting_key() {
            return Err(err_at(span, "mapping keys must be scalars"));
        }
        Ok(())
    }

    fn complete_key(&mut self, key: Key, anchor: usize, span: &Span) -> Result<(), YamlError> {
        if anchor != 0
            && let Key::Normal(k, _) = &key
        {
            self.remember(anchor, Value::String(k.clone()));
        }
        if let Some(Frame::Map { key: slot, .. }) = self.stack.last_mut() {
            *slot = Some(key);
            return Ok(());
        }
        Err(err_at(span, "internal error: key outside a mapping"))
    }

    fn remember(&mut self, anchor: usize, value: Value) {
        if self.anchors.len() <= anchor {
            self.anchors.resize_with(anchor + 1, || None);
        }
        let size = measure(&value);
        self.anchors[anchor] = Some((value, size));
    }

    /// A finished node: store its anchor and hand it to the enclosing collection.
    fn complete(&mut self, value: Value, anchor: usize, span: &Span) -> Result<(), YamlError> {
        if anchor != 0 {
            self.remember(anchor, value.clone());
        }
        match self.stack.last_mut() {
            None => {
                let texts = self.texts.as_mut().map(std::mem::take);
                if !value.is_null() {
                    self.docs.push(value);
                    self.doc_texts.extend(texts);
                }
                Ok(())
            }
            Some(Frame::Seq { items, .. }) => {
                items.push(value);
                Ok(())
            }
            Some(Frame::Map {
                map,
                lines,
                key,
                merge,
                ..
            }) => match key.take() {
                Some(Key::Normal(k, _)) if self.duplicate_keys == DuplicateKeys::LastWins => {
                    if !map.contains_key(&k) {
                        lines.push(0);
                    }
                    map.insert(k, value);
                    Ok(())
                }
                Some(Key::Merge) => {
                    if merge.is_some() {
                        return Err(err_at(span, "mapping key \"<<\" already defined"));
                    }
                    *merge = Some((value, span.start.line()));
                    Ok(())
                }
                Some(Key::Normal(k, line)) => insert_unique(map, lines, k, line, value),
                None => Err(err_at(span, "internal error: value without a key")),
            },
        }
    }

    fn close(&mut self, span: &Span) -> Result<(), YamlError> {
        let (value, anchor) = match self.stack.pop() {
            Some(Frame::Seq { items, anchor }) => (Value::Array(items), anchor),
            Some(Frame::Map {
                map, merge, anchor, ..
            }) => {
                let map = match merge {
                    Some((sources, line)) => apply_merge(map, sources, line)?,
                    None => map,
                };
                (Value::Object(map), anchor)
            }
            None => return Err(err_at(span, "internal error: unbalanced collection end")),
        };
        self.complete(value, anchor, span)
    }
}

fn insert_unique(
    map: &mut Map<String, Value>,
    lines: &mut Vec<usize>,
    key: String,
    line: usize,
    value: Value,
) -> Result<(), YamlError> {
    if map.contains_key(&key) {
        let pos = map.keys().position(|k| *k == key).unwrap_or(0);
        let first = lines.get(pos).copied().unwrap_or(0);
        return Err(YamlError(format!(
            "line {line}: mapping key {key:?} already defined at line {first}"
        )));
    }
    map.insert(key, value);
    lines.push(line);
    Ok(())
}

/// kyaml's merge: the map's own keys keep their place and win; merged-in keys follow, taken
/// from the last source first so that earlier sources win.
fn apply_merge(
    mut own: Map<String, Value>,
    sources: Value,
    line: usize,
) -> Result<Map<String, Value>, YamlError> {
    let sources = match sources {
        Value::Object(m) => vec![m],
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::Object(m) => Ok(m),
                _ => Err(YamlError(format!(
                    "line {line}: map merge requires map or sequence of maps as the value"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(YamlError(format!(
                "line {line}: map merge requires map or sequence of maps as the value"
            )));
        }
    };
    let mut merged = Map::new();
    for source in sources.into_iter().rev() {
        merged.extend(source);
    }
    for (k, v) in merged {
        if !own.contains_key(&k) {
            own.insert(k, v);
        }
    }
    Ok(own)
}

fn too_deep(span: &Span) -> YamlError {
    err_at(
        span,
        format!("collections nested more than {MAX_DEPTH} levels deep"),
    )
}

/// Nodes, bytes and depth of a value (its depth is bounded by [`MAX_DEPTH`], so the
/// recursion is too).
fn measure(v: &Value) -> Size {
    let mut size = Size {
        nodes: 1,
        bytes: NODE_OVERHEAD,
        depth: 0,
    };
    let mut add = |child: Size, key: usize| {
        size.nodes = size.nodes.saturating_add(child.nodes);
        size.bytes = size.bytes.saturating_add(child.bytes).saturating_add(key);
        size.depth = size.depth.max(child.depth + 1);
    };
    match v {
        Value::Array(items) => items.iter().for_each(|item| add(measure(item), 0)),
        Value::Object(map) => map.iter().for_each(|(k, item)| add(measure(item), k.len())),
        Value::String(text) => size.bytes = size.bytes.saturating_add(text.len()),
        _ => {}
    }
    if !matches!(v, Value::Array(_) | Value::Object(_)) {
        size.depth = 0;
    } else if size.depth == 0 {
        size.depth = 1;
    }
    size
}

fn core_suffix(tag: &Tag) -> Option<&str> {
    (tag.handle() == CORE_TAG_PREFIX).then(|| tag.suffix())
}

fn scalar_key(text: Cow<'_, str>, style: ScalarStyle, tag: Option<&Tag>, span: &Span) -> Key {
    if style == ScalarStyle::Plain && tag.is_none() && text == "<<" {
        return Key::Merge;
    }
    Key::Normal(text.into_owned(), span.start.line())
}

fn key_from_value(v: &Value, span: &Span) -> Result<String, YamlError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok("null".to_owned()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(err_at(span, "mapping keys must be scalars")),
    }
}

/// The value of a scalar node: quoted and block scalars are strings; plain ones are resolved;
/// explicit core tags are honoured (`!!binary` is decoded into text); other tags keep the text.
fn scalar_value(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    span: &Span,
    booleans: Booleans,
) -> Result<Value, YamlError> {
    let Some(tag) = tag else {
        if style == ScalarStyle::Plain {
            return match booleans.resolve(text) {
                Plain::Str if booleans == Booleans::Yaml12 => timestamp_or_string(text, span),
                resolved => Ok(resolved.into_value(text)),
            };
        }
        return Ok(Value::String(text.to_owned()));
    };
    let Some(suffix) = core_suffix(tag) else {
        return Ok(Value::String(text.to_owned()));
    };
    if suffix == "binary" {
        return decode_binary(text)
            .map(Value::String)
            .ok_or_else(|| err_at(span, "!!binary value contains invalid base64 data"));
    }
    let resolved = resolve_plain(text);
    let ok = match (suffix, resolved) {
        ("null", Plain::Null)
        | ("bool", Plain::Bool(_))
        | ("int", Plain::Int(_) | Plain::Uint(_))
        | ("float", Plain::Float(_) | Plain::NonFinite(_)) => true,
        ("float", Plain::Int(i)) => return Ok(float_value(i as f64, text)),
        ("float", Plain::Uint(u)) => return Ok(float_value(u as f64, text)),
        ("null" | "bool" | "int" | "float", _) => false,
        _ => return Ok(Value::String(text.to_owned())),
    };
    if !ok {
        return Err(err_at(
            span,
            format!("cannot decode {text:?} as a !!{suffix}"),
        ));
    }
    Ok(resolved.into_value(text))
}

/// An untagged plain string as go-yaml v3 reads it into kustomize's JSON: a timestamp becomes
/// a `time.Time`, which JSON prints in RFC 3339 (or refuses, for a zone of 24 hours or more);
/// anything else stays as written. (go-yaml v2 keeps timestamps as written.)
fn timestamp_or_string(text: &str, span: &Span) -> Result<Value, YamlError> {
    let Some(time) = parse_go_timestamp(text) else {
        return Ok(Value::String(text.to_owned()));
    };
    time.rfc3339_nano().map(Value::String).ok_or_else(|| {
        err_at(
            span,
            format!("cannot print {text:?}: timezone hour outside of range [0,23]"),
        )
    })
}

/// A `!!binary` scalar as go-yaml reads it into a string: standard base64 with padding
/// (line breaks ignored, as Go's decoder does), the decoded bytes taken as text with each
/// byte that is not part of valid UTF-8 replaced by U+FFFD (as Go's JSON encoding does).
fn decode_binary(text: &str) -> Option<String> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let cleaned: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    let bytes = GO_STD.decode(cleaned).ok()?;
    Some(go_lossy_utf8(&bytes))
}

/// `bytes` as text, every byte outside a valid UTF-8 sequence becoming U+FFFD.
fn go_lossy_utf8(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(rest.len());
                out.extend(std::iter::repeat_n('\u{fffd}', bad));
                bytes = rest.get(bad..).unwrap_or_default();
            }
        }
    }
}

fn float_value(f: f64, text: &str) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or_else(|| Value::String(text.to_owned()))
}
