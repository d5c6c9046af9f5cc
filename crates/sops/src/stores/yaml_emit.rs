//! Writing sops' YAML store: the node tree sops' `appendTreeBranch` builds (comments attached
//! as head, line and foot comments), turned into the event stream go-yaml v3's encoder makes
//! of it, and written by a port of the block-style parts of go-yaml v3's emitter with
//! indentation 4 and no line folding.

use zeroize::Zeroizing;

use super::StoreError;
use super::json::go_format_float;
use crate::tree::{Branch, Branches, Comment, Key, Value};
use goyaml::scalar::{Plain, go_timestamp, resolve_plain};

const BEST_INDENT: i64 = 4;
/// Longest key (in bytes, with its tag) go-yaml writes as a simple `key:`; longer ones get `? `.
const MAX_SIMPLE_KEY: usize = 128;

/// Writes every branch as one YAML document, `---` between them.
pub(super) fn emit(branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    let mut emitter = Emitter::new();
    for (index, branch) in branches.0.iter().enumerate() {
        let root = map_node(branch);
        let mut events = Vec::new();
        events.push(Event::DocumentStart);
        node_events(&root, String::new(), &mut events);
        events.push(Event::DocumentEnd);
        emitter.document(&events, index == 0);
    }
    emitter.stream_end();
    Ok(Zeroizing::new(
        std::mem::take(&mut emitter.out).into_bytes(),
    ))
}

// ---------------------------------------------------------------------------------------
// Nodes, as sops builds them.

#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

enum Kind {
    Scalar {
        text: String,
        tag: Option<&'static str>,
        style: Style,
    },
    Map(Vec<(Node, Node)>),
    Seq(Vec<Node>),
}

struct Node {
    kind: Kind,
    head: String,
    line: String,
    foot: String,
}

impl Node {
    fn new(kind: Kind) -> Node {
        Node {
            kind,
            head: String::new(),
            line: String::new(),
            foot: String::new(),
        }
    }
}

/// `#a\n#b` from comment texts, as sops joins them.
fn joined(comments: &[String]) -> String {
    comments
        .iter()
        .map(|c| format!("#{c}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn add_head(target: &mut String, comments: &mut Vec<String>) {
    if comments.is_empty() {
        return;
    }
    let comment = joined(comments);
    *target = if target.is_empty() {
        comment
    } else {
        format!("{comment}\n{target}")
    };
    comments.clear();
}

fn add_tail(target: &mut String, comments: &mut Vec<String>) {
    if comments.is_empty() {
        return;
    }
    let comment = joined(comments);
    if target.is_empty() {
        *target = comment;
    } else {
        target.push('\n');
        target.push_str(&comment);
    }
    comments.clear();
}

/// The comments met while sops' `appendTreeBranch` and `appendSequence` walk a branch or a
/// sequence, kept until the entry they attach to.
#[derive(Default)]
struct PendingComments {
    /// Comments on lines of their own: the head of the next entry.
    heads: Vec<String>,
    /// Comments at the end of a line: the line comment of the next entry's value.
    inlines: Vec<String>,
    /// Whether an entry has been met.
    started: bool,
}

impl PendingComments {
    fn push(&mut self, comment: &Comment) {
        if comment.inline {
            self.inlines.push(comment.text.clone());
        } else {
            self.heads.push(comment.text.clone());
        }
    }

    /// Before the first entry, the comments met so far are the container's head.
    fn start_entry(&mut self, container: &mut Node) {
        if !self.started {
            add_head(&mut container.head, &mut self.heads);
            self.started = true;
        }
    }

    /// The comments after the last entry go to its foot (`last_foot`), or to the container's
    /// head when there is no entry.
    fn finish(mut self, container: &mut Node, last_foot: Option<&mut String>) {
        self.heads.append(&mut self.inlines);
        if !self.heads.is_empty() {
            match last_foot {
                Some(foot) => add_tail(foot, &mut self.heads),
                None => add_head(&mut container.head, &mut self.heads),
            }
        }
    }
}

/// sops' `appendTreeBranch`.
fn map_node(branch: &Branch) -> Node {
    let mut node = Node::new(Kind::Map(Vec::new()));
    let mut pairs: Vec<(Node, Node)> = Vec::new();
    let mut comments = PendingComments::default();
    for item in branch {
        if let Key::Comment(c) = &item.key {
            comments.push(c);
            continue;
        }
        comments.start_entry(&mut node);
        let mut key = key_node(&item.key);
        add_head(&mut key.head, &mut comments.heads);
        let mut value = value_node(&item.value);
        add_tail(&mut value.line, &mut comments.inlines);
        pairs.push((key, value));
    }
    comments.finish(&mut node, pairs.last_mut().map(|(key, _)| &mut key.foot));
    node.kind = Kind::Map(pairs);
    node
}

/// sops' `appendSequence`.
fn seq_node(values: &[Value]) -> Node {
    let mut node = Node::new(Kind::Seq(Vec::new()));
    let mut items: Vec<Node> = Vec::new();
    let mut comments = PendingComments::default();
    for value in values {
        if let Value::Comment(c) = value {
            comments.push(c);
            continue;
        }
        comments.start_entry(&mut node);
        let mut item = value_node(value);
        add_head(&mut item.head, &mut comments.heads);
        add_tail(&mut item.line, &mut comments.inlines);
        items.push(item);
    }
    comments.finish(&mut node, items.last_mut().map(|item| &mut item.foot));
    node.kind = Kind::Seq(items);
    node
}

fn key_node(key: &Key) -> Node {
    match key {
        Key::Name(s) => string_node(s),
        Key::NonString(s) | Key::Comment(crate::tree::Comment { text: s, .. }) => {
            scalar(s.clone(), Style::Plain)
        }
    }
}

fn scalar(text: String, style: Style) -> Node {
    Node::new(Kind::Scalar {
        text,
        tag: None,
        style,
    })
}

fn value_node(value: &Value) -> Node {
    match value {
        Value::Map(branch) => map_node(branch),
        Value::Seq(items) => seq_node(items),
        Value::Null => scalar("null".into(), Style::Plain),
        Value::Bool(b) => scalar(b.to_string(), Style::Plain),
        Value::Int(i) => scalar(i.to_string(), Style::Plain),
        Value::Float(f) => scalar(yaml_float(*f), Style::Plain),
        Value::Time(t) => scalar(t.clone(), Style::Plain),
        Value::String(s) => string_node(s),
        Value::Comment(c) => string_node(&c.text),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => string_node(s),
            Err(_) => {
                use base64::Engine;
                Node::new(Kind::Scalar {
                    text: base64::engine::general_purpose::STANDARD.encode(b),
                    tag: Some("!!binary"),
                    style: Style::Plain,
                })
            }
        },
    }
}

/// go-yaml's float: `strconv.FormatFloat(f, 'g', -1, 64)`, infinities and NaN as YAML spells
/// them.
fn yaml_float(f: f64) -> String {
    if f.is_nan() {
        ".nan".into()
    } else if f == f64::INFINITY {
        ".inf".into()
    } else if f == f64::NEG_INFINITY {
        "-.inf".into()
    } else {
        go_format_float(f, 'g')
    }
}

/// go-yaml's `stringv`: a literal block for multi-line text, plain when the text reads back
/// as the same string (and is not a YAML 1.1 boolean or base-60 float), else double quotes.
fn string_node(s: &str) -> Node {
    if s == "<<" {
        // go-yaml re-reads its own quoted `"<<"` as a merge key and writes it tagged.
        return Node::new(Kind::Scalar {
            text: s.to_string(),
            tag: Some("!!merge"),
            style: Style::Plain,
        });
    }
    let style = if s.contains('\n') {
        Style::Literal
    } else if reads_as_string(s) {
        Style::Plain
    } else {
        Style::Double
    };
    scalar(s.to_string(), style)
}

fn reads_as_string(s: &str) -> bool {
    resolve_plain(s) == Plain::Str
        && go_timestamp(s).is_none()
        && !is_old_bool(s)
        && !is_base60_float(s)
}

fn is_old_bool(s: &str) -> bool {
    matches!(
        s,
        "y" | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "on"
            | "On"
            | "ON"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if !matches!(b.get(i), Some(b'0'..=b'9')) {
        return false;
    }
    while matches!(b.get(i), Some(b'0'..=b'9' | b'_')) {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && i - start < 2 && b[i].is_ascii_digit() {
            i += 1;
        }
        let group = &b[start..i];
        let valid = match group {
            [d] => d.is_ascii_digit(),
            [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
            _ => false,
        };
        if !valid {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while matches!(b.get(i), Some(b'0'..=b'9' | b'_')) {
            i += 1;
        }
    }
    i == b.len()
}

// ---------------------------------------------------------------------------------------
// Events, as go-yaml's encoder produces them from nodes.

enum Event {
    DocumentStart,
    DocumentEnd,
    MappingStart {
        head: String,
        tail: String,
        empty: bool,
    },
    MappingEnd {
        tail: String,
        line: String,
        foot: String,
    },
    SequenceStart {
        head: String,
        empty: bool,
    },
    SequenceEnd {
        line: String,
        foot: String,
    },
    Scalar {
        text: String,
        tag: Option<&'static str>,
        style: Style,
        head: String,
        line: String,
        foot: String,
        tail: String,
    },
}

fn node_events(node: &Node, tail: String, events: &mut Vec<Event>) {
    match &node.kind {
        Kind::Scalar { text, tag, style } => events.push(Event::Scalar {
            text: text.clone(),
            tag: *tag,
            style: *style,
            head: node.head.clone(),
            line: node.line.clone(),
            foot: node.foot.clone(),
            tail,
        }),
        Kind::Seq(items) => {
            events.push(Event::SequenceStart {
                head: node.head.clone(),
                empty: items.is_empty(),
            });
            for item in items {
                node_events(item, String::new(), events);
            }
            events.push(Event::SequenceEnd {
                line: node.line.clone(),
                foot: node.foot.clone(),
            });
        }
        Kind::Map(pairs) => {
            events.push(Event::MappingStart {
                head: node.head.clone(),
                tail,
                empty: pairs.is_empty(),
            });
            let mut tail = String::new();
            for (key, value) in pairs {
                let foot = key.foot.clone();
                let key_copy = Node {
                    kind: match &key.kind {
                        Kind::Scalar { text, tag, style } => Kind::Scalar {
                            text: text.clone(),
                            tag: *tag,
                            style: *style,
                        },
                        _ => Kind::Seq(Vec::new()),
                    },
                    head: key.head.clone(),
                    line: key.line.clone(),
                    foot: String::new(),
                };
                node_events(&key_copy, std::mem::take(&mut tail), events);
                tail = foot;
                node_events(value, String::new(), events);
            }
            events.push(Event::MappingEnd {
                tail,
                line: node.line.clone(),
                foot: node.foot.clone(),
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The emitter.

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    DocumentContent,
    DocumentEnd,
    SequenceFirstItem,
    SequenceItem,
    MappingFirstKey,
    MappingKey,
    MappingSimpleValue,
    MappingValue,
    FlowEnd,
}

struct Emitter {
    out: String,
    column: i64,
    indent: i64,
    indents: Vec<i64>,
    states: Vec<State>,
    state: State,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    foot_indent: i64,
    head_comment: String,
    line_comment: String,
    foot_comment: String,
    tail_comment: String,
    key_line_comment: String,
    simple_key_context: bool,
    root_context: bool,
}

/// What the analysis of a scalar allows.
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

impl Emitter {
    fn new() -> Emitter {
        Emitter {
            out: String::new(),
            column: 0,
            indent: -1,
            indents: Vec::new(),
            states: Vec::new(),
            state: State::DocumentContent,
            whitespace: true,
            indention: true,
            open_ended: false,
            foot_indent: -1,
            head_comment: String::new(),
            line_comment: String::new(),
            foot_comment: String::new(),
            tail_comment: String::new(),
            key_line_comment: String::new(),
            simple_key_context: false,
            root_context: false,
        }
    }

    fn document(&mut self, events: &[Event], first: bool) {
        self.state = State::DocumentContent;
        self.indent = -1;
        self.indents.clear();
        self.states.clear();
        if !first {
            self.write_indent();
            self.write_indicator("---", true, false, false);
            self.write_indent();
        }
        for (i, event) in events.iter().enumerate() {
            if matches!(event, Event::DocumentStart) {
                continue;
            }
            self.analyze(event);
            let next = events.get(i + 1);
            self.dispatch(event, next);
        }
    }

    fn stream_end(&mut self) {
        if self.open_ended {
            self.write_indicator("...", true, false, false);
            self.write_indent();
        }
    }

    fn analyze(&mut self, event: &Event) {
        let (head, line, foot, tail) = match event {
            Event::Scalar {
                head,
                line,
                foot,
                tail,
                ..
            } => (head.as_str(), line.as_str(), foot.as_str(), tail.as_str()),
            Event::MappingStart { head, tail, .. } => (head.as_str(), "", "", tail.as_str()),
            Event::MappingEnd { tail, line, foot } => {
                ("", line.as_str(), foot.as_str(), tail.as_str())
            }
            Event::SequenceStart { head, .. } => (head.as_str(), "", "", ""),
            Event::SequenceEnd { line, foot } => ("", line.as_str(), foot.as_str(), ""),
            Event::DocumentStart | Event::DocumentEnd => ("", "", "", ""),
        };
        for (register, value) in [
            (&mut self.head_comment, head),
            (&mut self.line_comment, line),
            (&mut self.foot_comment, foot),
            (&mut self.tail_comment, tail),
        ] {
            if !value.is_empty() {
                *register = value.to_string();
            }
        }
    }

    fn dispatch(&mut self, event: &Event, next: Option<&Event>) {
        match self.state {
            State::DocumentContent => {
                self.states.push(State::DocumentEnd);
                self.node(event, next, true, false);
            }
            State::DocumentEnd => self.document_end(),
            State::SequenceFirstItem => self.sequence_item(event, next, true),
            State::SequenceItem => self.sequence_item(event, next, false),
            State::MappingFirstKey => self.mapping_key(event, next, true),
            State::MappingKey => self.mapping_key(event, next, false),
            State::MappingSimpleValue => self.mapping_value(event, next, true),
            State::MappingValue => self.mapping_value(event, next, false),
            State::FlowEnd => self.flow_end(event),
        }
    }

    fn document_end(&mut self) {
        self.foot_indent = 0;
        self.process_foot_comment();
        self.foot_indent = -1;
        self.write_indent();
    }

    fn pop_state(&mut self) {
        self.state = self.states.pop().unwrap_or(State::DocumentEnd);
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn node(&mut self, event: &Event, next: Option<&Event>, root: bool, simple_key: bool) {
        self.root_context = root;
        self.simple_key_context = simple_key;
        match event {
            Event::Scalar {
                text, tag, style, ..
            } => self.scalar(text, *tag, *style),
            Event::SequenceStart { empty, .. } => {
                let empty = *empty || matches!(next, Some(Event::SequenceEnd { .. }));
                if empty {
                    self.flow_start("[");
                } else {
                    self.state = State::SequenceFirstItem;
                }
            }
            Event::MappingStart { empty, .. } => {
                let empty = *empty || matches!(next, Some(Event::MappingEnd { .. }));
                if empty {
                    self.flow_start("{");
                } else {
                    self.state = State::MappingFirstKey;
                }
            }
            _ => self.pop_state(),
        }
    }

    /// An empty collection: `[]` or `{}` (the closing side runs on the end event).
    fn flow_start(&mut self, open: &str) {
        if self.root_context {
            // A document that is only comments: go-yaml writes them above the `{}`.
            self.process_head_comment();
        }
        self.write_indicator(open, true, true, false);
        self.increase_indent(true, false);
        self.state = State::FlowEnd;
    }

    fn flow_end(&mut self, event: &Event) {
        self.process_head_comment();
        self.pop_indent();
        let close = if matches!(event, Event::MappingEnd { .. }) {
            "}"
        } else {
            "]"
        };
        self.write_indicator(close, false, false, false);
        self.process_line_comment(false);
        self.process_foot_comment();
        self.pop_state();
    }

    fn sequence_item(&mut self, event: &Event, next: Option<&Event>, first: bool) {
        if first {
            self.increase_indent(false, false);
        }
        if matches!(event, Event::SequenceEnd { .. }) {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.process_head_comment();
        self.write_indent();
        self.write_indicator("-", true, false, true);
        self.states.push(State::SequenceItem);
        self.node(event, next, false, false);
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn mapping_key(&mut self, event: &Event, next: Option<&Event>, first: bool) {
        if first {
            self.increase_indent(false, false);
        }
        self.process_head_comment();
        if matches!(event, Event::MappingEnd { .. }) {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.write_indent();
        if !self.line_comment.is_empty() {
            self.key_line_comment = std::mem::take(&mut self.line_comment);
        }
        if let Event::Scalar { text, tag, .. } = event
            && (text.len() + tag.map_or(0, str::len) > MAX_SIMPLE_KEY
                || analyze_scalar(text).multiline)
        {
            self.write_indicator("?", true, false, true);
            self.states.push(State::MappingValue);
            self.node(event, next, false, false);
            return;
        }
        self.states.push(State::MappingSimpleValue);
        self.node(event, next, false, true);
    }

    fn mapping_value(&mut self, event: &Event, next: Option<&Event>, simple: bool) {
        if simple {
            self.write_indicator(":", false, false, false);
        } else {
            self.write_indent();
            self.write_indicator(":", true, false, true);
        }
        if !self.key_line_comment.is_empty() {
            match event {
                Event::Scalar { .. } if self.line_comment.is_empty() => {
                    self.line_comment = std::mem::take(&mut self.key_line_comment);
                }
                Event::Scalar { .. } => {}
                Event::MappingStart { .. } | Event::SequenceStart { .. } => {
                    std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
                    self.process_line_comment(false);
                    std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
                }
                _ => {}
            }
        }
        self.states.push(State::MappingKey);
        self.node(event, next, false, false);
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            if self.states.last() == Some(&State::SequenceItem) {
                self.indent += 2;
            } else {
                self.indent = BEST_INDENT * ((self.indent + BEST_INDENT) / BEST_INDENT);
            }
        }
    }

    // ---- scalars

    fn scalar(&mut self, text: &str, tag: Option<&'static str>, requested: Style) {
        let analysis = analyze_scalar(text);
        let style = self.select_style(text, requested, &analysis);
        if let Some(tag) = tag {
            self.write_indicator(tag, true, false, false);
        }
        self.increase_indent(true, false);
        match style {
            Style::Plain => self.write_plain(text),
            Style::Single => self.write_single(text),
            Style::Double => self.write_double(text),
            Style::Literal => self.write_literal(text),
        }
        self.pop_indent();
        self.pop_state();
    }

    fn select_style(&self, text: &str, requested: Style, a: &Analysis) -> Style {
        let mut style = requested;
        if self.simple_key_context && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain
            && (!a.block_plain_allowed || (text.is_empty() && self.simple_key_context))
        {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || self.simple_key_context) {
            style = Style::Double;
        }
        style
    }

    fn write_plain(&mut self, text: &str) {
        if !text.is_empty() && !self.whitespace {
            self.put(' ');
        }
        self.write_flow_text(text, None);
        if !text.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
        if self.root_context {
            self.open_ended = true;
        }
    }

    fn write_single(&mut self, text: &str) {
        self.write_indicator("'", true, false, false);
        let breaks = self.write_flow_text(text, Some('\''));
        if breaks {
            self.write_indent();
        }
        self.write_indicator("'", false, false, false);
    }

    /// The characters of a plain or single-quoted scalar: a line break is written doubled
    /// (go-yaml's rule for `\n`), the line after breaks indented, and `quote` doubled. Returns
    /// whether the text ended in line breaks.
    fn write_flow_text(&mut self, text: &str, quote: Option<char>) -> bool {
        let mut breaks = false;
        for c in text.chars() {
            if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if Some(c) == quote {
                    self.put(c);
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
        breaks
    }

    fn write_double(&mut self, text: &str) {
        self.write_indicator("\"", true, false, false);
        for c in text.chars() {
            if !is_printable(c) || c == '\u{FEFF}' || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                let escaped = match c {
                    '\0' => "0".to_string(),
                    '\u{7}' => "a".to_string(),
                    '\u{8}' => "b".to_string(),
                    '\t' => "t".to_string(),
                    '\n' => "n".to_string(),
                    '\u{b}' => "v".to_string(),
                    '\u{c}' => "f".to_string(),
                    '\r' => "r".to_string(),
                    '\u{1b}' => "e".to_string(),
                    '"' => "\"".to_string(),
                    '\\' => "\\".to_string(),
                    '\u{85}' => "N".to_string(),
                    '\u{a0}' => "_".to_string(),
                    '\u{2028}' => "L".to_string(),
                    '\u{2029}' => "P".to_string(),
                    c if (c as u32) <= 0xFF => format!("x{:02X}", c as u32),
                    c if (c as u32) <= 0xFFFF => format!("u{:04X}", c as u32),
                    c => format!("U{:08X}", c as u32),
                };
                for e in escaped.chars() {
                    self.put(e);
                }
            } else {
                self.put(c);
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_literal(&mut self, text: &str) {
        self.write_indicator("|", true, false, false);
        self.write_block_hints(text);
        self.process_line_comment(true);
        self.whitespace = true;
        let mut breaks = true;
        for c in text.chars() {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    breaks = false;
                }
                self.put(c);
                self.indention = false;
            }
        }
    }

    fn write_block_hints(&mut self, text: &str) {
        if text.starts_with(' ') || text.starts_with(is_break) {
            self.put_str(&BEST_INDENT.to_string());
        }
        self.open_ended = false;
        let mut chars = text.chars().rev();
        let chomp = match (chars.next(), chars.next()) {
            (None, _) => Some('-'),
            (Some(last), _) if !is_break(last) => Some('-'),
            (Some(_), None) => {
                self.open_ended = true;
                Some('+')
            }
            (Some(_), Some(before)) if is_break(before) => {
                self.open_ended = true;
                Some('+')
            }
            _ => None,
        };
        if let Some(c) = chomp {
            self.put(c);
        }
    }

    // ---- comments

    fn process_head_comment(&mut self) {
        if !self.tail_comment.is_empty() {
            self.write_indent();
            let tail = std::mem::take(&mut self.tail_comment);
            self.write_comment(&tail);
            self.foot_indent = self.indent.max(0);
        }
        if self.head_comment.is_empty() {
            return;
        }
        self.write_indent();
        let head = std::mem::take(&mut self.head_comment);
        self.write_comment(&head);
    }

    fn process_line_comment(&mut self, linebreak: bool) {
        if self.line_comment.is_empty() {
            if linebreak {
                self.put_break();
            }
            return;
        }
        if !self.whitespace {
            self.put(' ');
        }
        let line = std::mem::take(&mut self.line_comment);
        self.write_comment(&line);
    }

    fn process_foot_comment(&mut self) {
        if self.foot_comment.is_empty() {
            return;
        }
        self.write_indent();
        let foot = std::mem::take(&mut self.foot_comment);
        self.write_comment(&foot);
        self.foot_indent = self.indent.max(0);
    }

    fn write_comment(&mut self, comment: &str) {
        let mut breaks = false;
        let mut pound = false;
        for c in comment.chars() {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
                pound = false;
            } else {
                if breaks {
                    self.write_indent();
                }
                if !pound {
                    if c != '#' {
                        self.put_str("# ");
                    }
                    pound = true;
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
        if !breaks {
            self.put_break();
        }
        self.indention = true;
        self.whitespace = true;
    }

    // ---- low-level writing

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_str(&mut self, s: &str) {
        for c in s.chars() {
            self.put(c);
        }
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        self.indention = true;
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        if self.foot_indent == indent {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.foot_indent = -1;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        self.put_str(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
        self.open_ended = false;
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

fn is_blank_or_end(c: Option<char>) -> bool {
    matches!(c, None | Some(' ' | '\t')) || c.is_some_and(is_break)
}

/// go-yaml's `yaml_emitter_analyze_scalar` (flow parts left out: only block context here).
fn analyze_scalar(value: &str) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let mut block_indicators = value.starts_with("---") || value.starts_with("...");
    let (mut line_breaks, mut special, mut tabs) = (false, false, false);
    let (mut leading_space, mut leading_break) = (false, false);
    let (mut trailing_space, mut trailing_break) = (false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    let chars: Vec<char> = value.chars().collect();
    let last = chars.len() - 1;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = i == last || matches!(chars.get(i + 1), Some(' ' | '\t'));
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_indicators = true,
                '?' | ':' | '-' if followed_by_whitespace => block_indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => block_indicators = true,
                '#' if preceded_by_whitespace => block_indicators = true,
                _ => {}
            }
        }
        if c == '\t' {
            tabs = true;
        } else if !is_printable(c) {
            special = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            leading_break |= i == 0;
            trailing_break |= i == last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blank_or_end(Some(c));
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || tabs || special {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || special {
        a.block_allowed = false;
    }
    if line_breaks || block_indicators {
        a.block_plain_allowed = false;
    }
    a
}
