//! Go's bracketed character classes (`[a-z]`, `[^]x]`, `[[:alpha:]\d]`), written as
//! `regex` crate classes.

use super::error::{ErrorCode, SyntaxError};
use super::escape::{parse_escape, perl_class, push_literal, reason, unicode_class};

/// The POSIX class names Go knows (the `regex` crate knows the same, with the same
/// ASCII meaning).
const POSIX_NAMES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Translates the class at the start of `rest` (which starts with `[`) into `out`;
/// returns the bytes it takes.
pub(super) fn translate_class(rest: &str, out: &mut String) -> Result<usize, SyntaxError> {
    let missing = || reason(ErrorCode::MissingBracket, rest);
    let mut pos = 1;
    out.push('[');
    if rest[pos..].starts_with('^') {
        out.push('^');
        pos += 1;
    }
    let mut first = true;
    loop {
        let t = &rest[pos..];
        if t.is_empty() {
            return Err(missing());
        }
        if t.starts_with(']') && !first {
            out.push(']');
            return Ok(pos + 1);
        }
        first = false;
        if let Some(len) = posix_class(t)? {
            out.push_str(&t[..len]);
            pos += len;
            continue;
        }
        if let Some(class) = unicode_class(t) {
            let text = class?;
            out.push_str(text);
            pos += text.len();
            continue;
        }
        if let Some(class) = t
            .strip_prefix('\\')
            .and_then(|s| s.chars().next())
            .and_then(perl_class)
        {
            out.push_str(class);
            pos += 2;
            continue;
        }
        let (lo, lo_len) = class_char(t).map_err(|e| e.unwrap_or_else(missing))?;
        let after = &t[lo_len..];
        let bytes = after.as_bytes();
        if bytes.len() >= 2 && bytes[0] == b'-' && bytes[1] != b']' {
            let (hi, hi_len) = class_char(&after[1..]).map_err(|e| e.unwrap_or_else(missing))?;
            let range_len = lo_len + 1 + hi_len;
            if hi < lo {
                return Err(reason(ErrorCode::InvalidCharRange, &t[..range_len]));
            }
            push_literal(out, lo);
            out.push('-');
            push_literal(out, hi);
            pos += range_len;
        } else {
            push_literal(out, lo);
            pos += lo_len;
        }
    }
}

/// A POSIX class `[:alpha:]` or `[:^alpha:]` at the start of `t`: its length, `None` when
/// `t` does not start with one (then `[` is a plain character), an error for an unknown
/// name.
fn posix_class(t: &str) -> Result<Option<usize>, SyntaxError> {
    if t.len() <= 2 || !t.starts_with("[:") {
        return Ok(None);
    }
    let Some(end) = t[2..].find(":]") else {
        return Ok(None);
    };
    let len = 2 + end + 2;
    let name = &t[2..2 + end];
    let name = name.strip_prefix('^').unwrap_or(name);
    if POSIX_NAMES.contains(&name) {
        Ok(Some(len))
    } else {
        Err(reason(ErrorCode::InvalidCharRange, &t[..len]))
    }
}

/// One character of a class, escaped or not: the character and its length. `Err(None)`
/// when the class ends before it.
fn class_char(t: &str) -> Result<(char, usize), Option<SyntaxError>> {
    let Some(c) = t.chars().next() else {
        return Err(None);
    };
    if c == '\\' {
        return parse_escape(t).map_err(Some);
    }
    Ok((c, c.len_utf8()))
}
