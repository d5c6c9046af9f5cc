//! The walk over a Go pattern that writes the same pattern in the `regex` crate's syntax.

use std::collections::HashSet;

use super::GoRegexError;
use super::class::translate_class;
use super::error::{ErrorCode, SyntaxError};
use super::escape::{parse_escape, perl_class, push_literal, reason, unicode_class};

/// Go's largest repetition count.
const MAX_REPEAT: i64 = 1000;

/// Rewrites the Go pattern `pattern` so the `regex` crate gives it Go's meaning. Errors
/// where Go's `regexp.Compile` refuses the pattern (and for what the translation cannot
/// express).
pub fn translate(pattern: &str) -> Result<String, GoRegexError> {
    let mut walk = Walk {
        pattern,
        pos: 0,
        out: String::with_capacity(pattern.len() + 16),
        has_operand: false,
        last_repeat: None,
        depth: 0,
        names: HashSet::new(),
        pending_flags: String::new(),
        operand_start: 0,
        operand_repeated: false,
        group_starts: Vec::new(),
    };
    walk.run().map_err(|e| GoRegexError {
        pattern: pattern.to_string(),
        reason: e.into(),
    })?;
    Ok(walk.out)
}

struct Walk<'a> {
    pattern: &'a str,
    pos: usize,
    out: String,
    /// Whether a repetition operator here has something to repeat.
    has_operand: bool,
    /// Where the repetition operator just before began (Go refuses `a**`).
    last_repeat: Option<usize>,
    /// Open groups.
    depth: usize,
    /// Named groups seen (Go refuses a name twice).
    names: HashSet<&'a str>,
    /// Flag groups not written yet. Go applies a repetition after a flag group to what came
    /// before it (`b(?i)+` is `b+` then `(?i)`), the `regex` crate finds nothing to repeat
    /// there; so flags are written just before the next thing that is not a repetition.
    pending_flags: String,
    /// Where the last operand begins in `out`.
    operand_start: usize,
    /// Whether the last operand already has a repetition (Go's `a*(?i)+` repeats `a*`).
    operand_repeated: bool,
    /// Where each open group begins in `out`.
    group_starts: Vec<usize>,
}

impl<'a> Walk<'a> {
    fn rest(&self) -> &'a str {
        &self.pattern[self.pos..]
    }

    fn operand(&mut self) {
        self.has_operand = true;
        self.last_repeat = None;
        self.operand_repeated = false;
    }

    /// Writes pending flags and marks where the next operand begins; called before writing
    /// anything but a repetition.
    fn begin(&mut self) {
        self.out.push_str(&std::mem::take(&mut self.pending_flags));
        self.operand_start = self.out.len();
    }

    fn run(&mut self) -> Result<(), SyntaxError> {
        while let Some(c) = self.rest().chars().next() {
            match c {
                '(' => self.group()?,
                ')' => {
                    if self.depth == 0 {
                        return Err(reason(ErrorCode::UnexpectedParen, self.pattern));
                    }
                    self.depth -= 1;
                    self.begin();
                    self.operand_start = self.group_starts.pop().unwrap_or(0);
                    self.out.push(')');
                    self.pos += 1;
                    self.operand();
                }
                '|' => {
                    self.begin();
                    self.out.push('|');
                    self.pos += 1;
                    self.has_operand = false;
                    self.last_repeat = None;
                }
                '^' | '$' | '.' => {
                    self.begin();
                    self.out.push(c);
                    self.pos += 1;
                    self.operand();
                }
                '*' | '+' | '?' => self.repeat(1, None)?,
                '{' => match parse_repeat(self.rest()) {
                    Some((len, min, max)) => self.repeat(len, Some((min, max)))?,
                    None => self.literal('{', 1),
                },
                '[' => {
                    self.begin();
                    let len = translate_class(self.rest(), &mut self.out)?;
                    self.pos += len;
                    self.operand();
                }
                '\\' => self.escape()?,
                c => self.literal(c, c.len_utf8()),
            }
        }
        if self.depth > 0 {
            return Err(reason(ErrorCode::MissingParen, self.pattern));
        }
        self.begin();
        Ok(())
    }

    fn literal(&mut self, c: char, len: usize) {
        self.begin();
        push_literal(&mut self.out, c);
        self.pos += len;
        self.operand();
    }

    /// A repetition operator `len` bytes long at `pos`: `*`, `+`, `?` (`counts` `None`) or
    /// `{min,max}` (`max` -1 for no limit), with an optional lazy `?` after it.
    fn repeat(&mut self, len: usize, counts: Option<(i64, i64)>) -> Result<(), SyntaxError> {
        let start = self.pos;
        let mut end = start + len;
        if let Some((min, max)) = counts
            && (!(0..=MAX_REPEAT).contains(&min) || max > MAX_REPEAT || (max >= 0 && min > max))
        {
            return Err(reason(
                ErrorCode::InvalidRepeatSize,
                &self.pattern[start..end],
            ));
        }
        let lazy = self.pattern[end..].starts_with('?');
        if lazy {
            end += 1;
        }
        if let Some(previous) = self.last_repeat {
            return Err(reason(
                ErrorCode::InvalidRepeatOp,
                &self.pattern[previous..end],
            ));
        }
        if !self.has_operand {
            return Err(reason(
                ErrorCode::MissingRepeatArgument,
                &self.pattern[start..end],
            ));
        }
        if self.operand_repeated {
            // Repeating a repetition (only reachable across a flag group): group it first.
            self.out.insert_str(self.operand_start, "(?:");
            self.out.push(')');
        }
        match counts {
            None => self.out.push_str(&self.pattern[start..start + len]),
            Some((min, -1)) => self.out.push_str(&format!("{{{min},}}")),
            Some((min, max)) if min == max => self.out.push_str(&format!("{{{min}}}")),
            Some((min, max)) => self.out.push_str(&format!("{{{min},{max}}}")),
        }
        if lazy {
            self.out.push('?');
        }
        self.pos = end;
        self.last_repeat = Some(start);
        self.operand_repeated = true;
        Ok(())
    }

    /// `(`, `(?P<name>`, `(?<name>`, `(?flags)` or `(?flags:`.
    fn group(&mut self) -> Result<(), SyntaxError> {
        let rest = self.rest();
        let Some(after) = rest.strip_prefix("(?") else {
            self.open_group("(", 1);
            return Ok(());
        };
        let named = after
            .strip_prefix("P<")
            .filter(|_| rest.len() > 4)
            .or_else(|| after.strip_prefix('<'));
        if let Some(name_and_rest) = named {
            let Some(end) = name_and_rest.find('>') else {
                return Err(reason(ErrorCode::InvalidNamedCapture, rest));
            };
            let name = &name_and_rest[..end];
            let len = rest.len() - name_and_rest.len() + end + 1;
            if name.is_empty() || !name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()) {
                return Err(reason(ErrorCode::InvalidNamedCapture, &rest[..len]));
            }
            if !self.names.insert(name) {
                return Err(reason(ErrorCode::DuplicateName, name));
            }
            // Only whether a pattern matches is ever asked, so the name is not needed (and
            // Go allows names the `regex` crate does not, like `1a`).
            self.open_group("(", len);
            return Ok(());
        }
        self.flags(after)
    }

    fn open_group(&mut self, text: &str, len: usize) {
        self.begin();
        self.group_starts.push(self.out.len());
        self.out.push_str(text);
        self.pos += len;
        self.depth += 1;
        self.has_operand = false;
        self.last_repeat = None;
    }

    /// A flag group; `after` follows its `(?`. Each of `i`, `m`, `s`, `U` takes the last
    /// setting written (Go allows `(?i-i)`, the `regex` crate refuses repeated flags).
    fn flags(&mut self, after: &str) -> Result<(), SyntaxError> {
        let mut on = String::new();
        let mut off = String::new();
        let mut negated = false;
        let mut saw_flag = false;
        for (i, c) in after.char_indices() {
            let invalid = || {
                let end = self.pos + 2 + i + c.len_utf8();
                reason(ErrorCode::InvalidPerlOp, &self.pattern[self.pos..end])
            };
            match c {
                'i' | 'm' | 's' | 'U' => {
                    on.retain(|f| f != c);
                    off.retain(|f| f != c);
                    if negated { &mut off } else { &mut on }.push(c);
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' => {
                    if negated && !saw_flag {
                        return Err(invalid());
                    }
                    let len = 2 + i + 1;
                    let mut text = String::from("(?");
                    text.push_str(&on);
                    if !off.is_empty() {
                        text.push('-');
                        text.push_str(&off);
                    }
                    if c == ':' {
                        text.push(':');
                        self.open_group(&text, len);
                    } else {
                        if text.len() > 2 {
                            text.push(')');
                            self.pending_flags.push_str(&text);
                        }
                        self.pos += len;
                        // A new token: `a*(?i)+` is not a nested repetition in Go.
                        self.last_repeat = None;
                    }
                    return Ok(());
                }
                _ => return Err(invalid()),
            }
        }
        Err(reason(ErrorCode::InvalidPerlOp, &self.pattern[self.pos..]))
    }

    /// A backslash escape outside a class.
    fn escape(&mut self) -> Result<(), SyntaxError> {
        let rest = self.rest();
        match rest[1..].chars().next() {
            Some('A') => self.assertion(r"\A"),
            Some('z') => self.assertion(r"\z"),
            // Go's word boundaries are ASCII.
            Some('b') => self.assertion(r"(?-u:\b)"),
            Some('B') => self.assertion(r"(?-u:\B)"),
            Some('C') => return Err(reason(ErrorCode::InvalidEscape, r"\C")),
            Some('Q') => {
                let quoted = &rest[2..];
                let (text, len) = match quoted.find(r"\E") {
                    Some(end) => (&quoted[..end], 2 + end + 2),
                    None => (quoted, rest.len()),
                };
                for c in text.chars() {
                    self.begin();
                    push_literal(&mut self.out, c);
                    self.operand();
                }
                self.pos += len;
            }
            Some('p' | 'P') => {
                let text = unicode_class(rest)
                    .unwrap_or_else(|| Err(reason(ErrorCode::InvalidCharRange, rest)))?;
                self.begin();
                self.out.push_str(text);
                self.pos += text.len();
                self.operand();
            }
            Some(c) if perl_class(c).is_some() => {
                self.begin();
                self.out.push_str(perl_class(c).unwrap_or_default());
                self.pos += 2;
                self.operand();
            }
            _ => {
                let (c, len) = parse_escape(rest)?;
                self.literal(c, len);
            }
        }
        Ok(())
    }

    fn assertion(&mut self, text: &str) {
        self.begin();
        self.out.push_str(text);
        self.pos += 2;
        self.operand();
    }
}

/// Go's `parseRepeat`: `{n}`, `{n,}` or `{n,m}` at the start of `s` (which starts with
/// `{`): its length and counts (`max` -1 for none, a count -1 when too large to read).
/// `None` when `s` does not start with a repetition, and then Go reads `{` as a literal.
fn parse_repeat(s: &str) -> Option<(usize, i64, i64)> {
    let body = s.strip_prefix('{')?;
    let (min, min_len) = parse_int(body)?;
    let mut pos = 1 + min_len;
    let max = if s[pos..].starts_with(',') {
        pos += 1;
        if s[pos..].starts_with('}') {
            -1
        } else {
            let (max, max_len) = parse_int(&s[pos..])?;
            pos += max_len;
            max
        }
    } else {
        min
    };
    s[pos..].starts_with('}').then_some((pos + 1, min, max))
}

/// Go's `parseInt` for repetition counts: digits without a leading zero, -1 when 1e8 or
/// more.
fn parse_int(s: &str) -> Option<(i64, usize)> {
    let len = s.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || (len >= 2 && s.starts_with('0')) {
        return None;
    }
    let mut n: i64 = 0;
    for b in s[..len].bytes() {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    Some((n, len))
}
