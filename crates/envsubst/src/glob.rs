//! Glob matching for the `#`, `##`, `%` and `%%` removal operators.
//!
//! Flux uses its own variant of Go's `path.Match`, and it differs from the standard one:
//! `*` and `?` match `/` too, and a trailing `*` matches the rest of the name whatever it
//! holds. The syntax is otherwise Go's: `*`, `?`, `[...]` classes with ranges and `^`
//! negation, and `\` escapes. Matching works on bytes; `?` and classes consume one
//! character decoded as Go decodes it.

use super::scan::decode_rune;

/// The pattern is malformed (an unclosed class, a trailing `\`, an empty range...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BadPattern;

/// Whether the whole of `name` matches `pattern`.
pub(super) fn matches(mut pattern: &[u8], mut name: &[u8]) -> Result<bool, BadPattern> {
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = split_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            return Ok(true);
        }
        // Try the chunk where we stand; when it is the last one it has to use up the name.
        if let Some(after) = match_chunk(chunk, name)?
            && (after.is_empty() || !pattern.is_empty())
        {
            name = after;
            continue;
        }
        if star {
            // Let the star swallow one more byte at a time and try again.
            for skipped in 1..=name.len() {
                if let Some(after) = match_chunk(chunk, &name[skipped..])? {
                    if pattern.is_empty() && !after.is_empty() {
                        continue;
                    }
                    name = after;
                    continue 'pattern;
                }
            }
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off the leading stars and the star-free chunk after them.
fn split_chunk(pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let stars = pattern.iter().take_while(|b| **b == b'*').count();
    let pattern = &pattern[stars..];
    let mut in_class = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' if !in_class => break,
            _ => {}
        }
        i += 1;
    }
    (stars > 0, &pattern[..i], &pattern[i..])
}

/// Matches a star-free chunk against the start of `s`; returns what is left of `s`, or
/// `None` when it does not match. Checks stop at the first mismatch, so a malformed tail of
/// the chunk is only reported when matching gets that far.
fn match_chunk<'a>(mut chunk: &[u8], mut s: &'a [u8]) -> Result<Option<&'a [u8]>, BadPattern> {
    while let Some(&c) = chunk.first() {
        if s.is_empty() {
            return Ok(None);
        }
        match c {
            b'[' => {
                let (r, width) = decode_rune(s);
                s = &s[width..];
                let (matched, rest) = match_class(r, &chunk[1..])?;
                if !matched {
                    return Ok(None);
                }
                chunk = rest;
            }
            b'?' => {
                let (_, width) = decode_rune(s);
                s = &s[width..];
                chunk = &chunk[1..];
            }
            _ => {
                let literal = if c == b'\\' {
                    chunk = &chunk[1..];
                    *chunk.first().ok_or(BadPattern)?
                } else {
                    c
                };
                if literal != s[0] {
                    return Ok(None);
                }
                s = &s[1..];
                chunk = &chunk[1..];
            }
        }
    }
    Ok(Some(s))
}

/// Matches `r` against the class whose body (after `[`) starts `chunk`; returns whether it
/// matched and the chunk after the closing `]`.
fn match_class(r: char, mut chunk: &[u8]) -> Result<(bool, &[u8]), BadPattern> {
    let mut negated = false;
    if chunk.first() == Some(&b'^') {
        negated = true;
        chunk = &chunk[1..];
    }
    let mut matched = false;
    let mut ranges = 0;
    loop {
        if chunk.first() == Some(&b']') && ranges > 0 {
            return Ok((matched != negated, &chunk[1..]));
        }
        let (lo, rest) = class_char(chunk)?;
        chunk = rest;
        let mut hi = lo;
        if chunk.first() == Some(&b'-') {
            let (end, rest) = class_char(&chunk[1..])?;
            hi = end;
            chunk = rest;
        }
        if lo <= r && r <= hi {
            matched = true;
        }
        ranges += 1;
    }
}

/// One possibly escaped character of a class; something must follow it.
fn class_char(chunk: &[u8]) -> Result<(char, &[u8]), BadPattern> {
    let mut chunk = match chunk.first() {
        None | Some(b'-') | Some(b']') => return Err(BadPattern),
        Some(_) => chunk,
    };
    if chunk[0] == b'\\' {
        chunk = &chunk[1..];
        if chunk.is_empty() {
            return Err(BadPattern);
        }
    }
    let (r, width) = decode_rune(chunk);
    if r == char::REPLACEMENT_CHARACTER && width == 1 {
        return Err(BadPattern);
    }
    let rest = &chunk[width..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((r, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, name: &str) -> Result<bool, BadPattern> {
        matches(pattern.as_bytes(), name.as_bytes())
    }

    #[test]
    fn literal_question_and_star() {
        assert_eq!(m("abc", "abc"), Ok(true));
        assert_eq!(m("abc", "abd"), Ok(false));
        assert_eq!(m("a?c", "abc"), Ok(true));
        assert_eq!(m("a?c", "aéc"), Ok(true));
        assert_eq!(m("a*", "a"), Ok(true));
        assert_eq!(m("*c", "abc"), Ok(true));
        assert_eq!(m("a*c", "abxc"), Ok(true));
        assert_eq!(m("a*c", "abxd"), Ok(false));
        assert_eq!(m("*.", "bash."), Ok(true));
    }

    #[test]
    fn star_and_question_cross_slashes() {
        assert_eq!(m("*/", "/path/to/"), Ok(true));
        assert_eq!(m("a*b", "a/x/b"), Ok(true));
        assert_eq!(m("a?b", "a/b"), Ok(true));
        assert_eq!(m("a*", "a/b/c"), Ok(true));
    }

    #[test]
    fn classes_and_escapes() {
        assert_eq!(m("[a-c]x", "bx"), Ok(true));
        assert_eq!(m("[^a-c]x", "bx"), Ok(false));
        assert_eq!(m("[^a-c]x", "dx"), Ok(true));
        assert_eq!(m("[\\]]", "]"), Ok(true));
        assert_eq!(m("\\*", "*"), Ok(true));
        assert_eq!(m("\\*", "a"), Ok(false));
    }

    #[test]
    fn malformed_patterns() {
        assert_eq!(m("[", "a"), Err(BadPattern));
        assert_eq!(m("[]a]", "a"), Err(BadPattern));
        assert_eq!(m("[a-]", "a"), Err(BadPattern));
        assert_eq!(m("a\\", "ab"), Err(BadPattern));
        // Running out of name ends matching before the malformed escape is seen.
        assert_eq!(m("a\\", "a"), Ok(false));
        // A malformed tail is not seen when matching stops before it.
        assert_eq!(m("b[", "a"), Ok(false));
    }
}
