//! The string functions behind the operators. `value` is the variable's value; the
//! arguments are already expanded. Results are bytes because byte-based offsets and pattern
//! removal can split a multi-byte character, as they do in Flux.

use super::SubstituteError;
use super::glob;
use super::scan::go_runes;

/// Whether the operator supplies its own fallback for an unset variable, so that strict mode
/// does not reject it.
pub(super) fn is_default_op(name: &str) -> bool {
    matches!(name, "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?")
}

/// Applies operator `name` of the expression on `param` to `value`. A replacement that
/// would produce more than `max` bytes stops with [`SubstituteError::TooLarge`] (the other
/// operators never give more than the value or their arguments, which are already counted).
pub(super) fn apply(
    name: &str,
    param: &str,
    value: &str,
    args: &[Vec<u8>],
    max: usize,
) -> Result<Vec<u8>, SubstituteError> {
    let bytes = value.as_bytes();
    let first = args.first().map(Vec::as_slice);
    Ok(match (name, first) {
        (",", _) => lower_first(value).into_bytes(),
        (",,", _) => value
            .chars()
            .map(simple_lower)
            .collect::<String>()
            .into_bytes(),
        ("^", _) => upper_first(value).into_bytes(),
        ("^^", _) => value
            .chars()
            .map(simple_upper)
            .collect::<String>()
            .into_bytes(),
        ("#", None) => value.len().to_string().into_bytes(),
        ("#", Some(pattern)) => trim_prefix(bytes, pattern, Longest::No),
        ("##", Some(pattern)) => trim_prefix(bytes, pattern, Longest::Yes),
        ("%", Some(pattern)) => trim_suffix(bytes, pattern, Longest::No),
        ("%%", Some(pattern)) => trim_suffix(bytes, pattern, Longest::Yes),
        (":", _) => return substring(param, bytes, args),
        ("/#", _) => replace_prefix(bytes, args),
        ("/%", _) => replace_suffix(bytes, args),
        ("/", _) => replace(bytes, args, Some(1), max)?,
        ("//", _) => replace(bytes, args, None, max)?,
        _ => default(bytes, args),
    })
}

/// The value, or the arguments joined when the value is empty. Every default-style operator
/// (`=`, `:=`, `:-`, `:+`, `:?`) and any unknown operator (such as `,^`) behaves this way.
fn default(value: &[u8], args: &[Vec<u8>]) -> Vec<u8> {
    if value.is_empty() && !args.is_empty() {
        args.concat()
    } else {
        value.to_vec()
    }
}

/// Go's `unicode.ToUpper`: the simple (one-character) mapping.
fn simple_upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    // Greek with ypogegrammeni: the full mapping has two characters, the simple one is the
    // titlecase letter.
    let code = c as u32;
    let simple = match code {
        0x1f80..=0x1f87 | 0x1f90..=0x1f97 | 0x1fa0..=0x1fa7 => Some(code + 8),
        0x1fb3 | 0x1fc3 | 0x1ff3 => Some(code + 9),
        _ => None,
    };
    if let Some(u) = simple.and_then(char::from_u32) {
        return u;
    }
    single(c.to_uppercase()).unwrap_or(c)
}

/// Go's `unicode.ToLower`: the simple (one-character) mapping.
fn simple_lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    if c == '\u{130}' {
        return 'i';
    }
    single(c.to_lowercase()).unwrap_or(c)
}

fn single(mut mapped: impl Iterator<Item = char>) -> Option<char> {
    match (mapped.next(), mapped.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

fn upper_first(value: &str) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(c) => std::iter::once(simple_upper(c)).chain(chars).collect(),
        None => String::new(),
    }
}

fn lower_first(value: &str) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(c) => std::iter::once(simple_lower(c)).chain(chars).collect(),
        None => String::new(),
    }
}

/// Go's `strconv.Atoi`.
fn atoi(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// `${var:offset}` and `${var:offset:length}` on bytes. An offset or length that is not a
/// number gives the value unchanged; a negative offset counts from the end. A negative
/// length that ends before the offset makes Flux panic; here it is an error.
fn substring(param: &str, value: &[u8], args: &[Vec<u8>]) -> Result<Vec<u8>, SubstituteError> {
    let Some(mut pos) = args.first().and_then(|a| atoi(a)) else {
        return Ok(value.to_vec());
    };
    let len = i64::try_from(value.len()).unwrap_or(i64::MAX);
    if pos < 0 {
        pos = (len + pos).max(0);
    }
    let rest = |pos: i64| match usize::try_from(pos) {
        Ok(p) if pos < len => value[p..].to_vec(),
        _ => Vec::new(),
    };
    let Some(length_arg) = args.get(1) else {
        return Ok(rest(pos));
    };
    let Some(length) = atoi(length_arg) else {
        return Ok(value.to_vec());
    };
    // Go adds the two with wrap-around.
    let end = pos.wrapping_add(length);
    if end >= len {
        return Ok(rest(pos));
    }
    match (usize::try_from(pos), usize::try_from(end)) {
        (Ok(p), Ok(e)) if p <= e => Ok(value[p..e].to_vec()),
        _ => Err(SubstituteError::NegativeLength(
            match super::unquotable_name(param) {
                Some(_) => "(a name that is not quoted)".to_string(),
                None => param.to_string(),
            },
        )),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Longest {
    Yes,
    No,
}

/// Removes the shortest or longest non-empty prefix matching `pattern`. A malformed pattern
/// leaves the value unchanged.
fn trim_prefix(value: &[u8], pattern: &[u8], longest: Longest) -> Vec<u8> {
    let mut cut = None;
    // Candidate prefixes from the longest down to one byte.
    for end in (1..=value.len()).rev() {
        match glob::matches(pattern, &value[..end]) {
            Err(_) => return value.to_vec(),
            Ok(true) => {
                cut = Some(end);
                if longest == Longest::Yes {
                    break;
                }
            }
            Ok(false) => {}
        }
    }
    match cut {
        Some(end) => value[end..].to_vec(),
        None => value.to_vec(),
    }
}

/// Removes a matching suffix the way Flux does: by reversing the characters of both the
/// value and the pattern and removing a prefix. Reversal breaks patterns whose meaning
/// depends on order (`[a-z]`, `\*`), as it does in Flux.
fn trim_suffix(value: &[u8], pattern: &[u8], longest: Longest) -> Vec<u8> {
    let trimmed = trim_prefix(&reverse(value), &reverse(pattern), longest);
    reverse(&trimmed)
}

/// Reverses the characters of `bytes` (Go's `[]rune` decoding: each invalid byte becomes
/// U+FFFD).
fn reverse(bytes: &[u8]) -> Vec<u8> {
    go_runes(bytes)
        .into_iter()
        .rev()
        .collect::<String>()
        .into_bytes()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Go's `strings.Replace` of literal `old` (no glob) by `new`, at most `limit` times; an
/// empty `old` matches before every character and at the end.
fn replace_literal(
    value: &[u8],
    old: &[u8],
    new: &[u8],
    limit: Option<usize>,
    max: usize,
) -> Result<Vec<u8>, SubstituteError> {
    if old == new {
        return Ok(value.to_vec());
    }
    let mut out = Vec::with_capacity(value.len());
    let mut start = 0;
    let mut done = 0;
    while limit.is_none_or(|n| done < n) {
        let at = if old.is_empty() {
            if done == 0 {
                Some(start)
            } else {
                value.get(start..).filter(|r| !r.is_empty()).map(|r| {
                    let (_, width) = super::scan::decode_rune(r);
                    start + width
                })
            }
        } else {
            find(&value[start..], old).map(|i| start + i)
        };
        let Some(at) = at else { break };
        if out.len() + (at - start) + new.len() > max {
            return Err(SubstituteError::TooLarge { limit: max });
        }
        out.extend_from_slice(&value[start..at]);
        out.extend_from_slice(new);
        start = at + old.len();
        done += 1;
    }
    out.extend_from_slice(&value[start..]);
    Ok(out)
}

/// `${var/old/new}` (first) and `${var//old/new}` (all); without `new`, `old` is deleted.
fn replace(
    value: &[u8],
    args: &[Vec<u8>],
    limit: Option<usize>,
    max: usize,
) -> Result<Vec<u8>, SubstituteError> {
    match args {
        [] => Ok(value.to_vec()),
        [old] => replace_literal(value, old, b"", limit, max),
        [old, new, ..] => replace_literal(value, old, new, limit, max),
    }
}

/// `${var/#old/new}`: replaces a literal prefix. Without `new` the value is unchanged.
fn replace_prefix(value: &[u8], args: &[Vec<u8>]) -> Vec<u8> {
    match args {
        [old, new] if value.starts_with(old) => [new.as_slice(), &value[old.len()..]].concat(),
        _ => value.to_vec(),
    }
}

/// `${var/%old/new}`: replaces a literal suffix. Without `new` the value is unchanged.
fn replace_suffix(value: &[u8], args: &[Vec<u8>]) -> Vec<u8> {
    match args {
        [old, new] if value.ends_with(old) => {
            [&value[..value.len() - old.len()], new.as_slice()].concat()
        }
        _ => value.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(value: &str, old: &str, new: &str, limit: Option<usize>) -> String {
        String::from_utf8(
            replace_literal(
                value.as_bytes(),
                old.as_bytes(),
                new.as_bytes(),
                limit,
                usize::MAX,
            )
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn replacement_stops_at_its_byte_budget() {
        let value = "a".repeat(1000);
        let err = replace_literal(value.as_bytes(), b"", b"xxxxxxxxxx", None, 4096);
        assert_eq!(err, Err(SubstituteError::TooLarge { limit: 4096 }));
        let ok = replace_literal(value.as_bytes(), b"a", b"bb", None, 2000).unwrap();
        assert_eq!(ok.len(), 2000);
    }

    #[test]
    fn replace_follows_go_strings_replace() {
        assert_eq!(rep("aXbXc", "X", "-", None), "a-b-c");
        assert_eq!(rep("aXbXc", "X", "-", Some(1)), "a-bXc");
        assert_eq!(rep("aaa", "aa", "b", None), "ba");
        assert_eq!(rep("ab", "", "x", None), "xaxbx");
        assert_eq!(rep("éb", "", "x", None), "xéxbx");
        assert_eq!(rep("ab", "", "x", Some(1)), "xab");
        assert_eq!(rep("", "", "x", None), "x");
        assert_eq!(rep("abc", "z", "x", None), "abc");
    }

    #[test]
    fn simple_case_mappings() {
        assert_eq!(simple_upper('ß'), 'ß');
        assert_eq!(simple_upper('é'), 'É');
        assert_eq!(simple_upper('\u{1f80}'), '\u{1f88}');
        assert_eq!(simple_upper('\u{1fb3}'), '\u{1fbc}');
        assert_eq!(simple_upper('\u{1f88}'), '\u{1f88}');
        assert_eq!(simple_lower('\u{130}'), 'i');
        assert_eq!(simple_lower('Σ'), 'σ');
    }

    #[test]
    fn reverse_decodes_like_go() {
        assert_eq!(reverse("aé".as_bytes()), "éa".as_bytes());
        assert_eq!(reverse(&[b'a', 0xc3]), "\u{fffd}a".as_bytes());
    }
}
