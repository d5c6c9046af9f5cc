//! Block scalars (`|`, `>`) as kustomize ends up with them, where that differs from what the
//! YAML parser underneath gives:
//!
//! - at the end of the input, go-yaml v3 adds no line break after a last line that has none,
//!   and keeps none of a header line's break ([`at_end_of_input`]);
//! - kyaml writes every resource with go-yaml v3 and reads it back before kustomize prints it,
//!   and go-yaml v3's writer adds an empty line before each more-indented line of a folded
//!   scalar ([`through_kyaml`]).

use std::borrow::Cow;

use granit_parser::Span;

/// How a block scalar's final line breaks are kept (its `-` / `+` indicator).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Chomping {
    /// `-`: none.
    Strip,
    /// No indicator: the last one.
    Clip,
    /// `+`: all of them.
    Keep,
}

/// The value go-yaml v3 gives a block scalar that reaches the end of the input, where the YAML
/// 1.2 parser underneath (whose value is `value`, and `span` the scalar's extent) differs:
///
/// - when the last content line ends the input without a line break, go-yaml adds no line
///   break for it (`k: |\n  a\n  b` is `"a\nb"`), where the parser adds one;
/// - when the scalar has no content line, it is empty, or with `+` the line breaks after its
///   header line (`k: |+\n  ` is `""`).
///
/// `text` is the whole input. Block scalars that end before the end of the input come back
/// unchanged.
pub(crate) fn at_end_of_input<'a>(value: Cow<'a, str>, span: &Span, text: &str) -> Cow<'a, str> {
    if span.end.byte_offset() != Some(text.len()) {
        return value;
    }
    // Without content lines (the value has nothing but line breaks), the parser's span starts
    // at the indicator; with them, at the first content line.
    let header = span
        .start
        .byte_offset()
        .and_then(|start| text.get(start..))
        .filter(|rest| rest.starts_with(['|', '>']) && value.chars().all(|c| c == '\n'));
    if let Some(header) = header {
        return Cow::Owned(without_content(header));
    }
    let Some(stripped) = value.strip_suffix('\n') else {
        return value;
    };
    let last_line = text.rsplit(['\n', '\r']).next().unwrap_or_default();
    // The last line is content (not just indentation) when it goes past the scalar's
    // indentation, which is the column its first content line starts at.
    if last_line.chars().count() > span.start.col() {
        return Cow::Owned(stripped.to_owned());
    }
    value
}

/// A block scalar without content lines that runs from its indicator (`header` starts there)
/// to the end of the input: empty, or with `+` one line break per line after the header's.
fn without_content(header: &str) -> String {
    let indicators = &header[1..];
    let keep = indicators
        .chars()
        .take_while(|c| matches!(c, '+' | '-' | '0'..='9'))
        .any(|c| c == '+');
    if !keep {
        return String::new();
    }
    let Some(header_end) = header.find(['\n', '\r']) else {
        return String::new();
    };
    let after = &header[header_end..];
    let after = after
        .strip_prefix("\r\n")
        .or_else(|| after.get(1..))
        .unwrap_or_default();
    let breaks = after.replace("\r\n", "\n").matches(['\n', '\r']).count();
    "\n".repeat(breaks)
}

/// A folded scalar's value after kyaml's round trip: kustomize prints a resource by encoding
/// its node tree with go-yaml v3 (`RNode.MarshalJSON` calls `String()`) and decoding that text
/// again. The node keeps its folded style, and go-yaml v3's writer (`write_folded_scalar`)
/// decides whether a line break needs an extra empty line by looking at the start of the whole
/// value instead of the line that follows (it scans from index 0). Unless the value starts
/// with a space or tab, every `\n` that ends a line not starting with a space or tab is
/// written as an empty line; reading it back, the empty line stays where the next line is
/// more indented (`"a\n  b"` becomes `"a\n\n  b"`), and folds away elsewhere.
///
/// Values go-yaml v3 cannot write as a block scalar (empty, a space at the end or before a
/// line break, control characters, characters outside the BMP) are written double-quoted and
/// come back unchanged, and so do map keys (`is_key`) that go-yaml writes as simple keys (one
/// line, at most 128 bytes), which it quotes too.
pub(crate) fn through_kyaml(value: &str, is_key: bool) -> Cow<'_, str> {
    let simple_key = is_key && value.len() <= 128 && !value.contains(is_break);
    if simple_key || !block_allowed(value) {
        return Cow::Borrowed(value);
    }
    let (chomping, body) = write_folded(value);
    let read_back = read_block(&body, INDENT, false, chomping);
    if read_back == value {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(read_back)
    }
}

/// The indentation go-yaml v3 writes the content of the block scalar at; any positive value
/// gives the same value back.
const INDENT: usize = 2;

/// go-yaml's line breaks: LF, CR, NEL, LS and PS.
fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t')
}

/// go-yaml v3's `yaml_emitter_analyze_scalar` verdict on block style.
fn block_allowed(value: &str) -> bool {
    let mut previous_space = false;
    for c in value.chars() {
        if is_break(c) && previous_space {
            return false;
        }
        if c != '\t' && !is_printable(c) {
            return false;
        }
        previous_space = c == ' ';
    }
    !value.is_empty() && !previous_space
}

/// go-yaml's printable characters (its writer's test works on UTF-8 bytes and so leaves out
/// everything outside the BMP).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
        && c != '\u{feff}'
}

/// go-yaml v3's `yaml_emitter_write_block_scalar_hints` chomping: `-` unless the value ends
/// with a line break, `+` when it is one line break or ends with two.
fn chomping_of(value: &str) -> Chomping {
    let mut from_end = value.chars().rev();
    match (from_end.next(), from_end.next()) {
        (Some(last), _) if !is_break(last) => Chomping::Strip,
        (None, _) => Chomping::Strip,
        (Some(_), None) => Chomping::Keep,
        (Some(_), Some(before)) if is_break(before) => Chomping::Keep,
        _ => Chomping::Clip,
    }
}

/// The lines go-yaml v3's `yaml_emitter_write_folded_scalar` writes after the `>` header, at
/// indentation [`INDENT`], with no width limit (kyaml sets none), ending with a line break.
fn write_folded(value: &str) -> (Chomping, String) {
    let extra_breaks = value
        .chars()
        .find(|c| !is_break(*c))
        .is_some_and(|c| !is_blank(c));
    let mut out = String::with_capacity(value.len() + 16);
    let (mut breaks, mut leading_spaces) = (true, true);
    for c in value.chars() {
        if is_break(c) {
            if !breaks && !leading_spaces && c == '\n' && extra_breaks {
                out.push('\n');
            }
            out.push(c);
            breaks = true;
        } else {
            if breaks {
                out.extend(std::iter::repeat_n(' ', INDENT));
                leading_spaces = is_blank(c);
            }
            out.push(c);
            breaks = false;
        }
    }
    if !breaks {
        out.push('\n');
    }
    (chomping_of(value), out)
}

/// go-yaml v3's `yaml_parser_scan_block_scalar` from the first line after the header, the
/// content indentation being known: lines are joined (folded ones by a space where neither
/// line starts with a blank and no empty line is between them), then chomped.
fn read_block(body: &str, indent: usize, literal: bool, chomping: Chomping) -> String {
    let mut scan = BlockScan {
        chars: body.chars().collect(),
        pos: 0,
        column: 0,
    };
    let mut s = String::with_capacity(body.len());
    let (mut leading_break, mut trailing_breaks) = (String::new(), String::new());
    let mut leading_blank = false;
    scan.skip_indentation(indent, &mut trailing_breaks);
    while scan.column == indent && scan.peek().is_some() {
        let trailing_blank = scan.peek().is_some_and(is_blank);
        let folds = !literal && !leading_blank && !trailing_blank;
        if folds && leading_break.starts_with('\n') {
            if trailing_breaks.is_empty() {
                s.push(' ');
            }
        } else {
            s.push_str(&leading_break);
        }
        leading_break.clear();
        s.push_str(&trailing_breaks);
        trailing_breaks.clear();
        leading_blank = trailing_blank;
        scan.content_line(&mut s);
        scan.line_break(&mut leading_break);
        scan.skip_indentation(indent, &mut trailing_breaks);
    }
    if chomping != Chomping::Strip {
        s.push_str(&leading_break);
    }
    if chomping == Chomping::Keep {
        s.push_str(&trailing_breaks);
    }
    s
}

/// A position in a block scalar's text, with go-yaml's column count.
struct BlockScan {
    chars: Vec<char>,
    pos: usize,
    column: usize,
}

impl BlockScan {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn content_line(&mut self, s: &mut String) {
        while let Some(c) = self.peek().filter(|c| !is_break(*c)) {
            s.push(c);
            self.pos += 1;
            self.column += 1;
        }
    }

    /// go-yaml's `read_line`: CR LF, CR, LF and NEL become `\n`; LS and PS stay.
    fn line_break(&mut self, out: &mut String) {
        let Some(c) = self.peek().filter(|c| is_break(*c)) else {
            return;
        };
        self.pos += 1;
        if c == '\r' && self.peek() == Some('\n') {
            self.pos += 1;
        }
        out.push(if matches!(c, '\u{2028}' | '\u{2029}') {
            c
        } else {
            '\n'
        });
        self.column = 0;
    }

    /// go-yaml's `yaml_parser_scan_block_scalar_breaks`: indentation spaces and empty lines.
    fn skip_indentation(&mut self, indent: usize, breaks: &mut String) {
        loop {
            while self.column < indent && self.peek() == Some(' ') {
                self.pos += 1;
                self.column += 1;
            }
            if !self.peek().is_some_and(is_break) {
                return;
            }
            self.line_break(breaks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_yaml_v3_writes_an_empty_line_after_every_line_not_starting_with_a_blank() {
        let (chomping, body) = write_folded("a b\n  c\nd\ne");
        assert_eq!(chomping, Chomping::Strip);
        assert_eq!(body, "  a b\n\n    c\n  d\n\n  e\n");
        // Read back, the empty line stays before the more-indented line only.
        assert_eq!(
            read_block(&body, INDENT, false, chomping),
            "a b\n\n  c\nd\ne"
        );
    }

    #[test]
    fn values_go_yaml_v3_writes_otherwise_come_back_unchanged() {
        for value in [
            "a\n  b ",     // trailing space: double-quoted
            "a \n  b",     // space before a line break: double-quoted
            "a\n  b\u{1}", // control character: double-quoted
            "a\n  😀",     // outside the BMP: double-quoted
            " a\n  b",     // starts with a blank: no empty lines added
            "a b c",       // nothing more indented
            "",
        ] {
            assert_eq!(through_kyaml(value, false), value, "{value:?}");
        }
    }

    #[test]
    fn keys_change_only_when_go_yaml_writes_them_as_explicit_keys() {
        assert_eq!(through_kyaml("a\n  b", true), "a\n\n  b");
        assert_eq!(through_kyaml("a  b", true), "a  b");
    }

    #[test]
    fn chomping_follows_the_value_end() {
        assert_eq!(through_kyaml("a\n  b\n", false), "a\n\n  b\n");
        assert_eq!(through_kyaml("a\n  b\n\n", false), "a\n\n  b\n\n");
        assert_eq!(through_kyaml("a\n  b\n\n\n", false), "a\n\n  b\n\n\n");
    }
}
