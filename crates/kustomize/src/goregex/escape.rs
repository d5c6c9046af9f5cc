//! Go's escape sequences and literal characters, written in the `regex` crate's syntax.

use std::fmt::Write as _;

use super::error::{ErrorCode, SyntaxError};

/// Go's error for a refused pattern: what is wrong, and the fragment at fault.
pub(super) fn reason(code: ErrorCode, fragment: &str) -> SyntaxError {
    SyntaxError {
        code,
        expr: fragment.to_string(),
    }
}

/// Appends `c` as a literal that means `c` in the `regex` crate, inside or outside a
/// class: ASCII letters, digits and non-ASCII characters as themselves, every other
/// ASCII character as a hex escape (which never has a special meaning).
pub(super) fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || !c.is_ascii() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:02X}}}", u32::from(c));
    }
}

/// The ASCII-only Perl class `\c` (`d`, `s`, `w` or their negations) as a `regex` crate
/// class, usable on its own or nested in another class.
pub(super) fn perl_class(c: char) -> Option<&'static str> {
    Some(match c {
        'd' => "[0-9]",
        'D' => "[^0-9]",
        // Go's `\s` is `[\t\n\f\r ]`: no vertical tab.
        's' => r"[\x{09}\x{0A}\x{0C}\x{0D}\x{20}]",
        'S' => r"[^\x{09}\x{0A}\x{0C}\x{0D}\x{20}]",
        'w' => "[0-9A-Za-z_]",
        'W' => "[^0-9A-Za-z_]",
        _ => return None,
    })
}

/// A Unicode class `\pL`, `\p{Greek}`, `\PL` or `\P{^Greek}` at the start of `rest`
/// (which starts with the backslash): its text and length. `None` when `rest` does not
/// start with `\p` or `\P`.
pub(super) fn unicode_class(rest: &str) -> Option<Result<&str, SyntaxError>> {
    let tail = rest
        .strip_prefix("\\p")
        .or_else(|| rest.strip_prefix("\\P"))?;
    let mut chars = tail.chars();
    let Some(first) = chars.next() else {
        return Some(Err(reason(ErrorCode::InvalidCharRange, rest)));
    };
    if first != '{' {
        let text = &rest[..2 + first.len_utf8()];
        // Go's one-letter names are the general categories.
        return Some(if "CLMNPSZ".contains(first) {
            Ok(text)
        } else {
            Err(reason(ErrorCode::InvalidCharRange, text))
        });
    }
    Some(match tail.find('}') {
        Some(end) if end > 1 => Ok(&rest[..2 + end + 1]),
        Some(end) => Err(reason(ErrorCode::InvalidCharRange, &rest[..2 + end + 1])),
        None => Err(reason(ErrorCode::InvalidCharRange, rest)),
    })
}

/// Go's `parseEscape`: the character `rest` (starting with the backslash) escapes, and
/// how many bytes the escape takes. Octal (`\0`, `\12`, `\101`), hex (`\x41`, `\x{41}`),
/// `\a \f \n \r \t \v` and any escaped ASCII punctuation.
pub(super) fn parse_escape(rest: &str) -> Result<(char, usize), SyntaxError> {
    let after = &rest[1..];
    let Some(c) = after.chars().next() else {
        return Err(reason(ErrorCode::TrailingBackslash, ""));
    };
    let invalid = |len: usize| {
        let end = (1 + len).min(rest.len());
        reason(ErrorCode::InvalidEscape, rest.get(..end).unwrap_or(rest))
    };
    let bytes = after.as_bytes();
    let is_octal = |i: usize| bytes.get(i).is_some_and(|b| (b'0'..=b'7').contains(b));
    match c {
        '1'..='7' | '0' => {
            // A lone non-zero digit would be a backreference, which Go does not have.
            if c != '0' && !is_octal(1) {
                return Err(invalid(1));
            }
            let mut value = u32::from(bytes[0] - b'0');
            let mut len = 1;
            while len < 3 && is_octal(len) {
                value = value * 8 + u32::from(bytes[len] - b'0');
                len += 1;
            }
            let ch = char::from_u32(value).ok_or_else(|| invalid(len))?;
            Ok((ch, 1 + len))
        }
        'x' => parse_hex(after)
            .map(|(ch, len)| (ch, 1 + len))
            .ok_or_else(|| {
                let len = after.find(['}']).map_or(after.len(), |i| i + 1);
                invalid(len.min(after.len()))
            }),
        'a' => Ok(('\x07', 2)),
        'f' => Ok(('\x0C', 2)),
        'n' => Ok(('\n', 2)),
        'r' => Ok(('\r', 2)),
        't' => Ok(('\t', 2)),
        'v' => Ok(('\x0B', 2)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c, 2)),
        c => Err(invalid(c.len_utf8())),
    }
}

/// `x41` or `x{41}` at the start of `s`: the character and the bytes it takes.
fn parse_hex(s: &str) -> Option<(char, usize)> {
    let digits = s.strip_prefix('x')?;
    if let Some(braced) = digits.strip_prefix('{') {
        let end = braced.find('}')?;
        let hex = &braced[..end];
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let value = u32::from_str_radix(hex, 16).ok()?;
        return char::from_u32(value).map(|ch| (ch, 1 + 1 + end + 1));
    }
    let hex = digits.get(..2)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let value = u32::from_str_radix(hex, 16).ok()?;
    char::from_u32(value).map(|ch| (ch, 3))
}
