//! Reading sops' YAML store: every document of a stream as a branch, scalars typed as
//! go-yaml v3 decodes them into `interface{}`, aliases expanded, and comments kept where sops'
//! YAML store puts them (comment lines in document order; a comment at the end of a scalar's
//! line as an inline comment just before that item).

use std::collections::HashSet;

use base64::Engine;
use granit_parser::{Event, Options, Parser, Placement, ScalarStyle, ScanError, Span, Tag};

use super::StoreError;
use crate::tree::{Branch, Branches, Comment, Item, Key, Value};
use goyaml::scalar::{Plain, go_timestamp, resolve_plain};

/// Upper bound on nodes copied by alias expansion in one stream.
const MAX_ALIAS_NODES: usize = 1_000_000;

const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// Loads a YAML stream: one branch per document.
pub(super) fn load(data: &[u8]) -> Result<Branches, StoreError> {
    let text = std::str::from_utf8(data).map_err(|_| StoreError::NotUtf8 { format: "YAML" })?;
    let mut options = Options::default();
    options.emit_comments = true;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut builder = Builder {
        layout: Layout::new(text),
        ..Builder::default()
    };
    for event in parser {
        let (event, span) = event.map_err(scan_error)?;
        builder.event(event, &span)?;
    }
    Ok(Branches(std::mem::take(&mut builder.docs)))
}

fn scan_error(e: ScanError) -> StoreError {
    let mark = e.marker();
    StoreError::Syntax {
        format: "YAML",
        line: mark.line(),
        column: mark.col() + 1,
        reason: e.info(),
    }
}

fn syntax(span: &Span, reason: &str) -> StoreError {
    StoreError::Syntax {
        format: "YAML",
        line: span.start.line(),
        column: span.start.col() + 1,
        reason: reason.to_string(),
    }
}

/// A comment line not yet placed.
struct Pending {
    text: String,
    column: usize,
    /// 0-based line.
    line: usize,
    /// Already found to be a head comment of the content after it.
    head: bool,
}

/// Which lines are blank, and where the next content line starts, to place comments the way
/// go-yaml's scanner splits them into foot and head comments.
#[derive(Default)]
struct Layout {
    blank: Vec<bool>,
    /// For each line, the column of the first content (not blank, not comment) line after it.
    next_content_column: Vec<Option<usize>>,
}

impl Layout {
    fn new(text: &str) -> Layout {
        let lines: Vec<&str> = text.split('\n').collect();
        let blank: Vec<bool> = lines.iter().map(|l| l.trim().is_empty()).collect();
        let mut next_content_column = vec![None; lines.len()];
        let mut next = None;
        for (i, line) in lines.iter().enumerate().rev() {
            next_content_column[i] = next;
            let trimmed = line.trim_start();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                next = Some(line.len() - trimmed.len());
            }
        }
        Layout {
            blank,
            next_content_column,
        }
    }

    fn is_blank(&self, line: usize) -> bool {
        self.blank.get(line).copied().unwrap_or(true)
    }

    /// Whether the comment block starting at `first` (and ending at `last`) is a foot of the
    /// content before it, given the column of the innermost open block.
    fn is_foot(&self, first: usize, last: usize, column: usize, inner: usize) -> bool {
        let after_content = first > 0 && !self.is_blank(first - 1);
        if after_content && self.is_blank(last + 1) {
            return column >= inner;
        }
        let next = self.next_content_column.get(last).copied().flatten();
        match next {
            Some(next) => next < inner && column != next,
            None => column >= inner,
        }
    }
}

enum Frame {
    Map {
        items: Branch,
        /// The key read, waiting for its value.
        key: Option<Key>,
        seen: HashSet<(bool, String)>,
        /// Column of the collection (its first entry) and whether it is a block one.
        column: usize,
        block: bool,
        anchor: usize,
        /// Line of the last value added and its index in `items`.
        last: Option<(usize, usize)>,
    },
    Seq {
        items: Vec<Value>,
        column: usize,
        block: bool,
        anchor: usize,
        last: Option<(usize, usize)>,
    },
}

impl Frame {
    fn column(&self) -> usize {
        match self {
            Frame::Map { column, .. } | Frame::Seq { column, .. } => *column,
        }
    }

    fn block(&self) -> bool {
        match self {
            Frame::Map { block, .. } | Frame::Seq { block, .. } => *block,
        }
    }

    fn push_comment(&mut self, text: String, inline: bool) {
        let comment = Comment { text, inline };
        match self {
            Frame::Map { items, .. } => items.push(Item {
                key: Key::Comment(comment),
                value: Value::Null,
            }),
            Frame::Seq { items, .. } => items.push(Value::Comment(comment)),
        }
    }

    /// Puts an inline comment just before the value that ended on `line`; false when the
    /// last value is not on that line.
    fn insert_inline(&mut self, text: &str, line: usize) -> bool {
        let comment = Comment {
            text: text.to_string(),
            inline: true,
        };
        match self {
            Frame::Map {
                items,
                last: Some((l, index)),
                ..
            } if *l == line => {
                if let Some(Value::Map(_) | Value::Seq(_)) = items.get(*index).map(|i| &i.value) {
                    // sops keeps a collection's line comment at the collection's start.
                    if let Some(item) = items.get_mut(*index) {
                        prepend_comment(&mut item.value, comment.text);
                    }
                    return true;
                }
                items.insert(
                    *index,
                    Item {
                        key: Key::Comment(comment),
                        value: Value::Null,
                    },
                );
                *index += 1;
                true
            }
            Frame::Seq {
                items,
                last: Some((l, index)),
                ..
            } if *l == line => {
                if let Some(value @ (Value::Map(_) | Value::Seq(_))) = items.get_mut(*index) {
                    prepend_comment(value, comment.text);
                    return true;
                }
                items.insert(*index, Value::Comment(comment));
                *index += 1;
                true
            }
            _ => false,
        }
    }
}

/// Puts a comment line first in a collection.
fn prepend_comment(value: &mut Value, text: String) {
    let comment = Comment {
        text,
        inline: false,
    };
    match value {
        Value::Map(items) => items.insert(
            0,
            Item {
                key: Key::Comment(comment),
                value: Value::Null,
            },
        ),
        Value::Seq(items) => items.insert(0, Value::Comment(comment)),
        _ => {}
    }
}

#[derive(Default)]
struct Builder {
    layout: Layout,
    docs: Vec<Branch>,
    stack: Vec<Frame>,
    anchors: Vec<Option<(Value, usize)>>,
    alias_budget: usize,
    pending: Vec<Pending>,
    /// The current document's root, once complete.
    root: Option<Value>,
    /// Comments of the current document outside its root collection.
    doc_comments: Branch,
    in_document: bool,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), StoreError> {
        match event {
            Event::Comment(text, placement) => {
                self.comment(&text, placement, span);
                Ok(())
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.flush_pending();
                if self.expecting_key() {
                    let key = scalar_key(&text, style, tag.as_deref(), span)?;
                    if anchor != 0 {
                        self.remember(anchor, key_as_value(&key));
                    }
                    return self.set_key(key, span);
                }
                let value = scalar_value(&text, style, tag.as_deref(), span)?;
                self.complete(value, anchor, span)
            }
            Event::Alias(id) => {
                self.flush_pending();
                let value = self.alias(id, span)?;
                if self.expecting_key() {
                    let key = value_as_key(&value, span)?;
                    return self.set_key(key, span);
                }
                self.complete(value, 0, span)
            }
            Event::SequenceStart(style, anchor, _) => {
                self.start_collection(span, |column| Frame::Seq {
                    items: Vec::new(),
                    column,
                    block: is_block(style),
                    anchor,
                    last: None,
                })
            }
            Event::MappingStart(style, anchor, _) => {
                self.start_collection(span, |column| Frame::Map {
                    items: Branch::new(),
                    key: None,
                    seen: HashSet::new(),
                    column,
                    block: is_block(style),
                    anchor,
                    last: None,
                })
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(span),
            Event::DocumentStart(..) => {
                self.anchors.clear();
                self.in_document = true;
                self.root = None;
                self.doc_comments = Branch::new();
                Ok(())
            }
            Event::DocumentEnd => self.end_document(),
            _ => Ok(()),
        }
    }

    /// Opens the collection whose frame `frame` makes at the collection's column.
    fn start_collection(
        &mut self,
        span: &Span,
        frame: impl FnOnce(usize) -> Frame,
    ) -> Result<(), StoreError> {
        let column = self.open_collection(span)?;
        self.stack.push(frame(column));
        self.flush_pending();
        Ok(())
    }

    fn comment(&mut self, text: &str, placement: Placement, span: &Span) {
        if placement == Placement::Right {
            let line = span.start.line();
            if let Some(top) = self.stack.last_mut() {
                if let Frame::Map { key: Some(_), .. } = top {
                    // A comment after `key:` whose value starts on a later line.
                    top.push_comment(text.to_string(), false);
                    return;
                }
                if top.insert_inline(text, line) {
                    return;
                }
            }
        }
        self.pending.push(Pending {
            text: text.to_string(),
            column: span.start.col(),
            line: span.start.line().saturating_sub(1),
            head: false,
        });
    }

    /// Pending comments go to the innermost collection (before the entry about to start).
    fn flush_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            self.push_comment_here(p.text);
        }
    }

    fn push_comment_here(&mut self, text: String) {
        match self.stack.last_mut() {
            Some(frame) => frame.push_comment(text, false),
            None => self.doc_comments.push(Item {
                key: Key::Comment(Comment {
                    text,
                    inline: false,
                }),
                value: Value::Null,
            }),
        }
    }

    /// Before a collection starts: pending comments left of its column belong to the parent.
    fn open_collection(&mut self, span: &Span) -> Result<usize, StoreError> {
        if self.expecting_key() {
            return Err(syntax(span, "mapping keys must be scalars"));
        }
        let column = span.start.col();
        if !self.stack.is_empty() {
            let split = self
                .pending
                .iter()
                .position(|p| p.column >= column)
                .unwrap_or(self.pending.len());
            let outer: Vec<Pending> = self.pending.drain(..split).collect();
            for p in outer {
                self.push_comment_here(p.text);
            }
        }
        Ok(column)
    }

    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn set_key(&mut self, key: Key, span: &Span) -> Result<(), StoreError> {
        let Some(Frame::Map {
            key: slot, seen, ..
        }) = self.stack.last_mut()
        else {
            return Err(syntax(span, "internal error: key outside a mapping"));
        };
        let identity = match &key {
            Key::Name(k) => (true, k.clone()),
            Key::NonString(k) => (false, k.clone()),
            Key::Comment(_) => (false, String::new()),
        };
        if identity.1 != "<<" && !seen.insert(identity.clone()) {
            return Err(StoreError::DuplicateKey {
                line: span.start.line(),
                key: identity.1,
            });
        }
        *slot = Some(key);
        Ok(())
    }

    fn alias(&mut self, id: usize, span: &Span) -> Result<Value, StoreError> {
        let (value, size) = self
            .anchors
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| syntax(span, "unknown anchor"))?;
        self.alias_budget += size;
        if self.alias_budget > MAX_ALIAS_NODES {
            return Err(syntax(span, "document contains excessive aliasing"));
        }
        Ok(value.clone())
    }

    fn remember(&mut self, anchor: usize, value: Value) {
        if self.anchors.len() <= anchor {
            self.anchors.resize_with(anchor + 1, || None);
        }
        let size = node_count(&value);
        self.anchors[anchor] = Some((value, size));
    }

    fn complete(&mut self, value: Value, anchor: usize, span: &Span) -> Result<(), StoreError> {
        if anchor != 0 {
            self.remember(anchor, value.clone());
        }
        let line = span.end.line();
        match self.stack.last_mut() {
            None => {
                self.root = Some(value);
                Ok(())
            }
            Some(Frame::Seq { items, last, .. }) => {
                *last = Some((line, items.len()));
                items.push(value);
                Ok(())
            }
            Some(Frame::Map {
                items, key, last, ..
            }) => {
                let key = key
                    .take()
                    .ok_or_else(|| syntax(span, "internal error: value without a key"))?;
                *last = Some((line, items.len()));
                items.push(Item { key, value });
                Ok(())
            }
        }
    }

    fn close(&mut self, span: &Span) -> Result<(), StoreError> {
        self.place_feet();
        let (value, anchor) = match self.stack.pop() {
            Some(Frame::Seq { items, anchor, .. }) => (Value::Seq(items), anchor),
            Some(Frame::Map { items, anchor, .. }) => (Value::Map(items), anchor),
            None => return Err(syntax(span, "internal error: unbalanced collection end")),
        };
        self.complete(value, anchor, span)
    }

    /// Before a block closes: the leading comment blocks that go-yaml takes for feet of the
    /// content before them go into the innermost collection; the rest wait for the next node.
    fn place_feet(&mut self) {
        let Some(frame) = self.stack.last_mut() else {
            return;
        };
        if !frame.block() {
            for p in self.pending.drain(..) {
                frame.push_comment(p.text, false);
            }
            return;
        }
        let inner = frame.column();
        let mut taken = 0;
        while taken < self.pending.len() && !self.pending[taken].head {
            let first = &self.pending[taken];
            let mut end = taken + 1;
            let mut dedented = false;
            while end < self.pending.len()
                && self.pending[end].line == self.pending[end - 1].line + 1
            {
                let column = self.pending[end].column;
                if column != first.column && column < inner {
                    dedented = true;
                    break;
                }
                end += 1;
            }
            let last_line = self.pending[end - 1].line;
            if !dedented
                && !self
                    .layout
                    .is_foot(first.line, last_line, first.column, inner)
            {
                break;
            }
            taken = end;
        }
        for p in self.pending.drain(..taken) {
            frame.push_comment(p.text, false);
        }
        for p in &mut self.pending {
            p.head = true;
        }
    }

    fn end_document(&mut self) -> Result<(), StoreError> {
        if !self.in_document {
            return Ok(());
        }
        self.in_document = false;
        let document = self.docs.len() + 1;
        let mut branch = std::mem::take(&mut self.doc_comments);
        let mut root_items = match self.root.take() {
            Some(Value::Map(items)) => items,
            Some(Value::Null) | None => Branch::new(),
            Some(_) => return Err(StoreError::YamlNotMapping { document }),
        };
        // Comments before the root's first entry were placed in the root already; those
        // seen before the document's root started are in `branch`.
        branch.append(&mut root_items);
        for p in std::mem::take(&mut self.pending) {
            branch.push(Item {
                key: Key::Comment(Comment {
                    text: p.text,
                    inline: false,
                }),
                value: Value::Null,
            });
        }
        self.docs.push(branch);
        Ok(())
    }
}

fn is_block(style: granit_parser::StructureStyle) -> bool {
    style == granit_parser::StructureStyle::Block
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::Seq(a) => 1 + a.iter().map(node_count).sum::<usize>(),
        Value::Map(m) => 1 + m.iter().map(|i| node_count(&i.value)).sum::<usize>(),
        _ => 1,
    }
}

fn core_suffix(tag: &Tag) -> Option<&str> {
    (tag.handle() == CORE_TAG_PREFIX).then(|| tag.suffix())
}

/// A mapping key as go-yaml decodes it into `interface{}`: strings are names, anything
/// else (numbers, booleans, null, timestamps) is a non-string key kept as written.
fn scalar_key(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    span: &Span,
) -> Result<Key, StoreError> {
    let value = scalar_value(text, style, tag, span)?;
    Ok(match value {
        Value::String(s) => Key::Name(s),
        _ => Key::NonString(text.to_string()),
    })
}

fn key_as_value(key: &Key) -> Value {
    match key {
        Key::Name(s) => Value::String(s.clone()),
        Key::NonString(s) => match resolve_plain(s) {
            Plain::Null => Value::Null,
            _ => Value::String(s.clone()),
        },
        Key::Comment(_) => Value::Null,
    }
}

fn value_as_key(value: &Value, span: &Span) -> Result<Key, StoreError> {
    Ok(match value {
        Value::String(s) => Key::Name(s.clone()),
        Value::Null => Key::NonString("null".into()),
        Value::Bool(b) => Key::NonString(b.to_string()),
        Value::Int(i) => Key::NonString(i.to_string()),
        Value::Float(f) => Key::NonString(f.to_string()),
        Value::Time(t) => Key::NonString(t.clone()),
        _ => return Err(syntax(span, "mapping keys must be scalars")),
    })
}

/// The value of a scalar as go-yaml v3 decodes it into `interface{}`.
fn scalar_value(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    span: &Span,
) -> Result<Value, StoreError> {
    let Some(tag) = tag else {
        if style != ScalarStyle::Plain {
            return Ok(Value::String(text.to_string()));
        }
        return Ok(plain_value(text));
    };
    let Some(suffix) = core_suffix(tag) else {
        return Ok(Value::String(text.to_string()));
    };
    let resolved = resolve_plain(text);
    let bad = || syntax(span, &format!("cannot decode the scalar as a !!{suffix}"));
    Ok(match (suffix, resolved) {
        ("str", _) => Value::String(text.to_string()),
        ("null", Plain::Null) => Value::Null,
        ("bool", Plain::Bool(b)) => Value::Bool(b),
        ("int", Plain::Int(i)) => Value::Int(i),
        ("int", Plain::Uint(u)) => Value::Float(u as f64),
        ("float", Plain::Float(f)) => Value::Float(f),
        ("float", Plain::Int(i)) => Value::Float(i as f64),
        ("float", Plain::Uint(u)) => Value::Float(u as f64),
        ("float", Plain::NonFinite(s)) => Value::Float(non_finite(s)),
        ("timestamp", _) => Value::Time(go_timestamp(text).ok_or_else(bad)?),
        ("binary", _) => binary_value(text).ok_or_else(bad)?,
        ("null" | "bool" | "int" | "float", _) => return Err(bad()),
        _ => Value::String(text.to_string()),
    })
}

fn plain_value(text: &str) -> Value {
    match resolve_plain(text) {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(b),
        Plain::Int(i) => Value::Int(i),
        Plain::Uint(u) => Value::Float(u as f64),
        Plain::Float(f) => Value::Float(f),
        Plain::NonFinite(s) => Value::Float(non_finite(s)),
        Plain::Merge => Value::String(text.to_string()),
        Plain::Str => match go_timestamp(text) {
            Some(time) => Value::Time(time),
            None => Value::String(text.to_string()),
        },
    }
}

fn non_finite(s: &str) -> f64 {
    match s {
        ".inf" => f64::INFINITY,
        "-.inf" => f64::NEG_INFINITY,
        _ => f64::NAN,
    }
}

fn binary_value(text: &str) -> Option<Value> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .ok()?;
    Some(match String::from_utf8(bytes) {
        Ok(s) => Value::String(s),
        Err(e) => Value::Bytes(e.into_bytes()),
    })
}
