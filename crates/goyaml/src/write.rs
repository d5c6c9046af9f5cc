//! JSON values to YAML text in the layout kustomize prints (its output goes through
//! go-yaml v2's emitter): block style, 2-space indentation, sequences under a mapping key not
//! indented, long plain/quoted lines folded at column 80, multi-line strings as literal blocks.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use super::scalar::go_yaml_v2_quotes;

/// Column after which the emitter folds long scalars at a space.
const BEST_WIDTH: usize = 80;
const INDENT: usize = 2;
/// Keys longer than this (in bytes) are written as explicit `? key` entries.
const MAX_SIMPLE_KEY_LEN: usize = 128;

/// Serialises one document (ends with a newline).
pub(super) fn write_document(out: &mut String, doc: &Value) {
    let mut w = Writer { out, col: 0 };
    match doc {
        Value::Object(m) if !m.is_empty() => w.map(m, 0),
        Value::Array(a) if !a.is_empty() => w.seq(a, 0),
        scalar => w.scalar(scalar, INDENT, false),
    }
    w.end_document();
}

/// Serialises one non-empty mapping as a document (ends with a newline), as
/// [`write_document`] does for `Value::Object`.
pub(super) fn write_mapping(out: &mut String, map: &serde_json::Map<String, Value>) {
    if map.is_empty() {
        out.push_str("{}\n");
        return;
    }
    let mut w = Writer { out, col: 0 };
    w.map(map, 0);
    w.end_document();
}

struct Writer<'a> {
    out: &'a mut String,
    /// Characters written on the current line.
    col: usize,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

impl Writer<'_> {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.col += 1;
    }

    fn put_str(&mut self, s: &str) {
        self.out.push_str(s);
        self.col += s.chars().count();
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.col = 0;
    }

    /// Ends the document with a line break, unless the last value ended with a U+2028/U+2029
    /// that go-yaml counted as one.
    fn end_document(&mut self) {
        if self.col > 0 {
            self.newline();
        }
    }

    /// Starts a new line (unless already at the start of one) and indents to `indent`.
    fn indent_to(&mut self, indent: usize) {
        if self.col > 0 {
            self.newline();
        }
        self.pad(indent);
    }

    fn pad(&mut self, indent: usize) {
        for _ in self.col..indent {
            self.out.push(' ');
        }
        self.col = self.col.max(indent);
    }

    /// A block mapping whose keys sit at column `indent`; the cursor is already there.
    fn map(&mut self, m: &Map<String, Value>, indent: usize) {
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 {
                self.indent_to(indent);
            }
            let k = through_json(k);
            if is_simple_key(&k) {
                self.string(&k, indent + INDENT, true);
                self.put(':');
                self.map_value(v, indent);
            } else {
                self.put_str("? ");
                self.string(&k, indent + INDENT, false);
                self.indent_to(indent);
                self.put(':');
                self.compact_value(v, indent + INDENT);
            }
        }
    }

    fn map_value(&mut self, v: &Value, indent: usize) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                self.newline();
                self.pad(indent + INDENT);
                self.map(m, indent + INDENT);
            }
            Value::Array(a) if !a.is_empty() => {
                self.newline();
                self.pad(indent);
                self.seq(a, indent);
            }
            scalar => {
                self.put(' ');
                self.scalar(scalar, indent + INDENT, false);
            }
        }
    }

    /// A node written right after an indicator (`- ` or `: `), its content at `indent`.
    fn compact_value(&mut self, v: &Value, indent: usize) {
        self.put(' ');
        match v {
            Value::Object(m) if !m.is_empty() => self.map(m, indent),
            Value::Array(a) if !a.is_empty() => self.seq(a, indent),
            scalar => self.scalar(scalar, indent, false),
        }
    }

    /// A block sequence whose dashes sit at column `indent`; the cursor is already there.
    fn seq(&mut self, a: &[Value], indent: usize) {
        for (i, v) in a.iter().enumerate() {
            if i > 0 {
                self.indent_to(indent);
            }
            self.put('-');
            self.compact_value(v, indent + INDENT);
        }
    }

    /// A scalar (or empty collection); `indent` is where continuation lines start.
    fn scalar(&mut self, v: &Value, indent: usize, simple_key: bool) {
        match v {
            Value::Null => self.put_str("null"),
            Value::Bool(b) => self.put_str(if *b { "true" } else { "false" }),
            Value::Number(n) => self.put_str(&format_number(n)),
            Value::String(s) => self.string(&through_json(s), indent, simple_key),
            Value::Array(_) => self.put_str("[]"),
            Value::Object(_) => self.put_str("{}"),
        }
    }

    fn string(&mut self, s: &str, indent: usize, simple_key: bool) {
        match choose_style(s, simple_key) {
            Style::Plain => self.plain(s, indent, !simple_key),
            Style::Single => self.single_quoted(s, indent, !simple_key),
            Style::Double => self.double_quoted(s, indent, !simple_key),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// Breaks the line at a folding point: the folded space becomes the line break.
    fn fold(&mut self, indent: usize) {
        self.newline();
        self.pad(indent);
    }

    /// Whether a space at the current column may become a line break: breaks are allowed, the
    /// line is past the best width and the space does not follow another.
    fn may_fold(&self, allow_breaks: bool, after_space: bool) -> bool {
        allow_breaks && !after_space && self.col > BEST_WIDTH
    }

    /// Writes `c`, or folds the line there (`c` is then a space the break stands for).
    fn put_or_fold(&mut self, c: char, fold: bool, indent: usize) {
        if fold {
            self.fold(indent);
        } else {
            self.put(c);
        }
    }

    fn plain(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let mut spaces = false;
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            let fold =
                c == ' ' && self.may_fold(allow_breaks, spaces) && chars.peek() != Some(&' ');
            self.put_or_fold(c, fold, indent);
            spaces = c == ' ';
        }
    }

    /// A single-quoted scalar. Line breaks in it can only be U+2028/U+2029 (a string with
    /// `\n` is a literal block, one with U+0085 double-quoted): go-yaml writes such a break
    /// as it is and indents what follows, as if a line had ended.
    fn single_quoted(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.put('\'');
        let (mut spaces, mut breaks) = (false, false);
        let last = s.chars().count().saturating_sub(1);
        let mut chars = s.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            if c == ' ' {
                let next_is_space = chars.peek().is_some_and(|(_, n)| *n == ' ');
                let fold =
                    self.may_fold(allow_breaks, spaces) && i > 0 && i < last && !next_is_space;
                self.put_or_fold(c, fold, indent);
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.newline();
                }
                self.write_break(c);
                breaks = true;
            } else {
                if breaks {
                    // go-yaml's write_indent after a quote indicator: a line break only at
                    // indentation 0.
                    if indent == 0 {
                        self.newline();
                    }
                    self.pad(indent);
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                spaces = false;
                breaks = false;
            }
        }
        self.put('\'');
    }

    /// Writes a line break character of the value: `\n` ends the line; U+2028 and U+2029 are
    /// written as they are, and go-yaml counts the line as ended after them too.
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.newline();
        } else {
            self.out.push(c);
            self.col = 0;
        }
    }

    fn double_quoted(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.put('"');
        // go-yaml escapes every character of a string that starts with a byte-order mark.
        let escape_all = s.starts_with('\u{feff}');
        let mut spaces = false;
        let last = s.chars().count().saturating_sub(1);
        let mut chars = s.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            if escape_all || !is_printable(c) || is_break(c) || c == '"' || c == '\\' {
                self.escape(c);
                spaces = false;
                continue;
            }
            let fold = c == ' ' && self.may_fold(allow_breaks, spaces) && i > 0 && i < last;
            self.put_or_fold(c, fold, indent);
            // A space after the fold would be taken for indentation: it is escaped.
            if fold && chars.peek().is_some_and(|(_, n)| *n == ' ') {
                self.put('\\');
            }
            spaces = c == ' ';
        }
        self.put('"');
    }

    fn escape(&mut self, c: char) {
        self.put('\\');
        let short = match c {
            '\0' => '0',
            '\u{7}' => 'a',
            '\u{8}' => 'b',
            '\t' => 't',
            '\n' => 'n',
            '\u{b}' => 'v',
            '\u{c}' => 'f',
            '\r' => 'r',
            '\u{1b}' => 'e',
            '"' => '"',
            '\\' => '\\',
            '\u{85}' => 'N',
            '\u{a0}' => '_',
            '\u{2028}' => 'L',
            '\u{2029}' => 'P',
            _ => {
                let v = u32::from(c);
                let hex = if v <= 0xFF {
                    format!("x{v:02X}")
                } else if v <= 0xFFFF {
                    format!("u{v:04X}")
                } else {
                    format!("U{v:08X}")
                };
                self.put_str(&hex);
                return;
            }
        };
        self.put(short);
    }

    /// A literal block: `|`, an indentation indicator when the text starts with a space or a
    /// line break, the chomping indicator, then the text line by line (empty lines are not
    /// indented). A U+2028/U+2029 is a line break to go-yaml's writer: written as it is, with
    /// what follows indented; when the text ends with one, what comes next follows it directly.
    fn literal(&mut self, s: &str, indent: usize) {
        self.put('|');
        if s.starts_with(' ') || s.starts_with(is_break) {
            self.put_str(&INDENT.to_string());
        }
        if let Some(chomping) = chomping_indicator(s) {
            self.put(chomping);
        }
        self.newline();
        let mut breaks = true;
        for c in s.chars() {
            if is_break(c) {
                self.write_break(c);
                breaks = true;
            } else {
                if breaks {
                    self.pad(indent);
                }
                self.put(c);
                breaks = false;
            }
        }
    }
}

/// go-yaml's chomping indicator for a literal block: `-` unless the text ends with a line
/// break, `+` when it is only a line break or ends with two, none otherwise.
fn chomping_indicator(s: &str) -> Option<char> {
    let mut from_end = s.chars().rev();
    match (from_end.next(), from_end.next()) {
        (Some(last), _) if !is_break(last) => Some('-'),
        (None, _) => Some('-'),
        (Some(_), None) => Some('+'),
        (Some(_), Some(before)) if is_break(before) => Some('+'),
        _ => None,
    }
}

/// A string as go-yaml v2 reads it back from the JSON text kustomize hands to
/// `sigs.k8s.io/yaml.JSONToYAML`: Go's JSON encoding escapes every control character and line
/// break except U+0085 (NEL), which it writes as it is, and go-yaml reads a raw NEL inside a
/// double-quoted scalar as a line break and folds it. So a single NEL becomes a space, `n`
/// NELs in a row become `n - 1` newlines, and spaces around them disappear (`a \u{85} b` is
/// `a b`). Strings without NEL are unchanged.
fn through_json(s: &str) -> Cow<'_, str> {
    if !s.contains(NEL) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ' ' && c != NEL {
            out.push(c);
            continue;
        }
        let mut blanks = String::from(c);
        while let Some(&next) = chars.peek().filter(|n| matches!(**n, ' ' | NEL)) {
            blanks.push(next);
            chars.next();
        }
        out.push_str(&fold_blanks(&blanks));
    }
    Cow::Owned(out)
}

/// U+0085 NEXT LINE, a line break to YAML 1.1.
const NEL: char = '\u{85}';

/// What go-yaml's double-quoted scanner makes of a run of spaces and raw line breaks (here
/// only NEL): the spaces when there is no break; otherwise the spaces before the first break
/// and after each break are dropped, and the first break folds into a space when no other
/// break follows, each further break being a newline.
fn fold_blanks(blanks: &str) -> String {
    let breaks = blanks.chars().filter(|c| *c == NEL).count();
    match breaks {
        0 => blanks.to_owned(),
        1 => " ".to_owned(),
        n => "\n".repeat(n - 1),
    }
}

fn is_simple_key(k: &str) -> bool {
    k.len() <= MAX_SIMPLE_KEY_LEN && !k.chars().any(is_break)
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// go-yaml's printable set: 4-byte characters (emoji) are not, and are escaped.
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
        && c != '\u{feff}'
}

/// What go-yaml's scalar analysis allows for a string.
struct Allowed {
    plain: bool,
    single: bool,
    block: bool,
}

fn analyze(s: &str) -> Allowed {
    let b = s.as_bytes();
    let mut indicators = b.starts_with(b"---") || b.starts_with(b"...");
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break) = (false, false);
    let (mut trailing_space, mut trailing_break) = (false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_ws = true;
    let mut chars = s.chars().peekable();
    let mut first = true;
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let followed_by_ws = matches!(next, None | Some(' ' | '\t'));
        let is_last = next.is_none();
        if first {
            indicators |= match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => true,
                '?' | ':' | '-' => followed_by_ws,
                _ => false,
            };
        } else {
            indicators |= match c {
                ':' => followed_by_ws,
                '#' => preceded_by_ws,
                _ => false,
            };
        }
        // Tabs, control characters, U+0085, U+FEFF and characters outside the BMP.
        if !is_printable(c) {
            special = true;
        }
        if c == ' ' {
            leading_space |= first;
            trailing_space |= is_last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            leading_break |= first;
            trailing_break |= is_last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_ws = matches!(c, ' ' | '\t') || is_break(c);
        first = false;
    }
    let edge_ws = leading_space || leading_break || trailing_space || trailing_break;
    Allowed {
        plain: !(edge_ws || break_space || space_break || special || line_breaks || indicators),
        single: !(break_space || space_break || special),
        block: !(trailing_space || space_break || special),
    }
}

fn choose_style(s: &str, simple_key: bool) -> Style {
    let allowed = analyze(s);
    let mut style = if s.contains('\n') {
        Style::Literal
    } else if go_yaml_v2_quotes(s) {
        Style::Double
    } else {
        Style::Plain
    };
    if style == Style::Plain && !allowed.plain {
        style = Style::Single;
    }
    if style == Style::Single && !allowed.single {
        style = Style::Double;
    }
    if style == Style::Literal && (!allowed.block || simple_key) {
        style = Style::Double;
    }
    style
}

fn format_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    n.as_f64().map_or_else(|| n.to_string(), format_float)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: shortest digits, exponent form (signed, at
/// least two digits) below 1e-4 and from 1e6 up; `.0` is appended when the result would
/// otherwise read back as an integer.
pub(super) fn format_float(f: f64) -> String {
    // `{:e}` gives the shortest round-tripping digits: "1.2345e-7", "1e21", "-5e0".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
        return out;
    }
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
        return out;
    }
    let int_len = exp as usize + 1;
    if digits.len() > int_len {
        out.push_str(&digits[..int_len]);
        out.push('.');
        out.push_str(&digits[int_len..]);
    } else {
        out.push_str(&digits);
        for _ in digits.len()..int_len {
            out.push('0');
        }
        out.push_str(".0");
    }
    out
}
