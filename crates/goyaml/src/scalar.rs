//! Plain-scalar resolution as go-yaml v3 and v2 do it, and go-yaml v2's test for which strings
//! it must quote when it writes them (the writer's).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Number, Value};

pub use crate::timestamp::go_timestamp;
use crate::timestamp::parse_go_timestamp;

/// What an untagged plain scalar means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plain {
    /// `null`, `~`, empty.
    Null,
    /// `true`/`false` in their three spellings.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// A positive integer above `i64::MAX`.
    Uint(u64),
    /// A finite float.
    Float(f64),
    /// `.inf`, `-.inf`, `.nan` (not representable as JSON numbers).
    NonFinite(&'static str),
    /// The merge key `<<`.
    Merge,
    /// Anything else: a string.
    Str,
}

impl Plain {
    /// The JSON value; `text` is used for strings.
    pub fn into_value(self, text: &str) -> Value {
        match self {
            Plain::Null => Value::Null,
            Plain::Bool(b) => Value::Bool(b),
            Plain::Int(i) => Value::Number(i.into()),
            Plain::Uint(u) => Value::Number(u.into()),
            Plain::Float(f) => Number::from_f64(f)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(text.to_owned())),
            Plain::NonFinite(s) => Value::String(s.to_owned()),
            Plain::Merge | Plain::Str => Value::String(text.to_owned()),
        }
    }
}

/// Resolves an untagged plain scalar like go-yaml v3: YAML 1.2 keywords only (`yes`/`on` are
/// strings), Go base-0 integers with `_` removed (`0755` is octal, `0x1F`, `0o17`, `0b101`),
/// YAML-style floats; out-of-range integers become floats, out-of-range floats stay strings.
/// Timestamps are [`Plain::Str`] here; [`go_timestamp`] recognises them.
pub fn resolve_plain(s: &str) -> Plain {
    resolve(s, GoYaml::V3)
}

/// Resolves an untagged plain scalar like go-yaml v2 (what `sigs.k8s.io/yaml` reads and
/// writes with): as [`resolve_plain`], plus the YAML 1.1 booleans `y`, `yes`, `on`, `n`, `no`,
/// `off` (in their capitalised and upper-case spellings), minus go-yaml v3's signed `0o`
/// forms (`0o-7`).
pub fn resolve_plain_yaml11(s: &str) -> Plain {
    resolve(s, GoYaml::V2)
}

/// Which go-yaml's resolver (they differ in their keywords and in one integer form).
#[derive(Clone, Copy, PartialEq, Eq)]
enum GoYaml {
    V2,
    V3,
}

/// go-yaml's `resolve("", s)`: the first byte decides what `s` may be (a keyword, a float
/// starting with `.`, a number or timestamp starting with a digit or sign); anything else is a
/// string without further look.
fn resolve(s: &str, go_yaml: GoYaml) -> Plain {
    if let Some(keyword) = keyword(s, go_yaml) {
        return keyword;
    }
    match s.as_bytes().first() {
        Some(b'.') => go_parse_decimal_float(s).map_or(Plain::Str, Plain::Float),
        Some(b'0'..=b'9' | b'+' | b'-') => resolve_number(s, go_yaml),
        _ => Plain::Str,
    }
}

/// The scalars go-yaml finds in its table of words (only looked up for text starting with a
/// sign, digit, `.`, `~` or one of `yYnNtTfFoO`, which all of them do, except `<<`).
fn keyword(s: &str, go_yaml: GoYaml) -> Option<Plain> {
    let plain = match s {
        "" | "~" | "null" | "Null" | "NULL" => Plain::Null,
        "true" | "True" | "TRUE" => Plain::Bool(true),
        "false" | "False" | "FALSE" => Plain::Bool(false),
        ".nan" | ".NaN" | ".NAN" => Plain::NonFinite(".nan"),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Plain::NonFinite(".inf"),
        "-.inf" | "-.Inf" | "-.INF" => Plain::NonFinite("-.inf"),
        // go-yaml's table has `<<`, but its first byte is never looked up; the reader
        // recognises merge keys by their text.
        "<<" if go_yaml == GoYaml::V3 => Plain::Merge,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" if go_yaml == GoYaml::V2 => {
            Plain::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" if go_yaml == GoYaml::V2 => {
            Plain::Bool(false)
        }
        _ => return None,
    };
    Some(plain)
}

/// A plain scalar starting with a digit or sign (and not a timestamp): with every `_` removed,
/// Go's base-0 integer syntax, then a YAML-style float, then go-yaml's own `0b`/`0o` prefixes
/// followed by a signed number.
fn resolve_number(s: &str, go_yaml: GoYaml) -> Plain {
    let owned;
    let plain = if s.contains('_') {
        owned = s.replace('_', "");
        owned.as_str()
    } else {
        s
    };
    if let Some(n) = go_int(plain) {
        return n;
    }
    if let Some(f) = yaml_float(plain) {
        return Plain::Float(f);
    }
    prefixed_int(plain, go_yaml).unwrap_or(Plain::Str)
}

/// go-yaml's retries after Go's own syntax failed: `0b` then Go's `ParseInt(rest, 2, 64)` (which
/// allows a sign: `0b-101` is -5) or `ParseUint`, and `-0b` then `ParseInt("-" + rest, 2, 64)`;
/// go-yaml v3 does the same with `0o` and base 8.
fn prefixed_int(plain: &str, go_yaml: GoYaml) -> Option<Plain> {
    let mut prefixes = vec![("0b", "-0b", 2)];
    if go_yaml == GoYaml::V3 {
        prefixes.push(("0o", "-0o", 8));
    }
    for (prefix, negative, radix) in prefixes {
        if let Some(rest) = plain.strip_prefix(prefix) {
            return go_int_radix(rest, radix).or_else(|| go_uint_radix(rest, radix));
        }
        if let Some(rest) = plain.strip_prefix(negative) {
            return go_int_radix(&format!("-{rest}"), radix);
        }
    }
    None
}

/// Go's `strconv.ParseInt(s, radix, 64)`: an optional sign, then digits of the radix.
fn go_int_radix(s: &str, radix: u32) -> Option<Plain> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = radix_digits(digits, radix)?;
    let value = if neg {
        0i128.checked_sub(i128::try_from(magnitude).ok()?)?
    } else {
        i128::try_from(magnitude).ok()?
    };
    i64::try_from(value).ok().map(Plain::Int)
}

/// Go's `strconv.ParseUint(s, radix, 64)`: digits of the radix only.
fn go_uint_radix(s: &str, radix: u32) -> Option<Plain> {
    let value = u64::try_from(radix_digits(s, radix)?).ok()?;
    Some(i64::try_from(value).map_or(Plain::Uint(value), Plain::Int))
}

/// A non-empty run of digits of `radix`, as a number (`None` beyond `u128`).
fn radix_digits(digits: &str, radix: u32) -> Option<u128> {
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`.
fn go_int(s: &str) -> Option<Plain> {
    let (neg, signed, body) = match s.as_bytes().first()? {
        b'-' => (true, true, &s[1..]),
        b'+' => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let b = body.as_bytes();
    let (radix, digits) = match b {
        [b'0', b'x' | b'X', ..] => (16, &body[2..]),
        [b'0', b'o' | b'O', ..] => (8, &body[2..]),
        [b'0', b'b' | b'B', ..] => (2, &body[2..]),
        [b'0', _, ..] => (8, &body[1..]),
        _ => (10, body),
    };
    if digits.is_empty() || !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    let mag = u128::from_str_radix(digits, radix).ok()?;
    if neg {
        if mag <= 1u128 << 63 {
            return Some(Plain::Int((-(mag as i128)) as i64));
        }
        return None;
    }
    if let Ok(i) = i64::try_from(mag) {
        return Some(Plain::Int(i));
    }
    if !signed && let Ok(u) = u64::try_from(mag) {
        return Some(Plain::Uint(u));
    }
    None
}

/// Go's `strconv.ParseFloat(s, 64)` on decimal text (what go-yaml tries on plain scalars that
/// start with `.`): an optional sign, digits with at most one `.`, an optional exponent, and `_`
/// only between digits (Go's `underscoreOK`: `.5_5` is 0.55, `._5` is not a number). `None`
/// for other text and for values beyond `f64` (Go's range error). Go's hexadecimal, `inf` and
/// `nan` forms are not handled: they cannot start with `.`.
fn go_parse_decimal_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let (mut saw_dot, mut saw_digits) = (false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'_' => {}
            b'.' if !saw_dot => saw_dot = true,
            b'0'..=b'9' => saw_digits = true,
            _ => break,
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
            i += 1;
        }
    }
    if i != b.len() || (s.contains('_') && !go_underscores_ok(s)) {
        return None;
    }
    let f: f64 = s.replace('_', "").parse().ok()?;
    f.is_finite().then_some(f)
}

/// Go's `underscoreOK` for a number without base prefix: every `_` follows a digit and is
/// followed by one.
fn go_underscores_ok(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    // What came last: '^' the start, '0' a digit, '_' an underscore, '!' anything else.
    let mut saw = '^';
    for c in body.chars() {
        saw = match c {
            '0'..='9' => '0',
            '_' if saw != '0' => return false,
            '_' => '_',
            _ if saw == '_' => return false,
            _ => '!',
        };
    }
    saw != '_'
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, parsed; `None` when it does not
/// match or overflows (Go reports a range error there and the scalar stays a string).
fn yaml_float(s: &str) -> Option<f64> {
    if !is_yaml_float_syntax(s) {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

fn is_yaml_float_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// go-yaml v2's `base60float`: YAML 1.1 sexagesimal numbers (`1:20`, `-1:20:30.5`), which it
/// does not read as numbers but quotes when writing "for compatibility with other parsers".
static BASE60_FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
        .unwrap_or_else(|_| unreachable!("constant pattern is valid"))
});

/// True when go-yaml v2 writes this string double-quoted rather than plain (`encoder.stringv`):
/// when its resolver would read the plain text back as something else (null, a YAML 1.1
/// boolean, a number, a timestamp; see [`resolve_plain_yaml11`]) or the text is a base-60
/// float. Everything else may be plain as far as the resolver goes (`=`, `<<`, `1e400`,
/// `0x10000000000000000`); the emitter's own syntax rules decide the rest.
pub(super) fn go_yaml_v2_quotes(s: &str) -> bool {
    resolve_plain_yaml11(s) != Plain::Str
        || parse_go_timestamp(s).is_some()
        || BASE60_FLOAT.is_match(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolver_table() {
        use Plain::*;
        let cases: &[(&str, Plain)] = &[
            ("", Null),
            ("~", Null),
            ("null", Null),
            ("Null", Null),
            ("NULL", Null),
            ("nULL", Str),
            ("true", Bool(true)),
            ("True", Bool(true)),
            ("TRUE", Bool(true)),
            ("false", Bool(false)),
            ("FALSE", Bool(false)),
            ("yes", Str),
            ("no", Str),
            ("on", Str),
            ("off", Str),
            ("y", Str),
            ("0", Int(0)),
            ("-0", Int(0)),
            ("42", Int(42)),
            ("+42", Int(42)),
            ("-42", Int(-42)),
            ("0755", Int(493)),
            ("0x1F", Int(31)),
            ("0X1f", Int(31)),
            ("-0x10", Int(-16)),
            ("0o17", Int(15)),
            ("0b101", Int(5)),
            ("1_000", Int(1000)),
            ("08", Float(8.0)),
            ("9223372036854775807", Int(i64::MAX)),
            ("-9223372036854775808", Int(i64::MIN)),
            ("9223372036854775808", Uint(1 << 63)),
            ("18446744073709551615", Uint(u64::MAX)),
            ("18446744073709551616", Float(18446744073709551616.0)),
            ("+9223372036854775808", Float(9223372036854775808.0)),
            ("0x", Str),
            ("0xFFFFFFFFFFFFFFFFFF", Str),
            ("1.5", Float(1.5)),
            ("1.", Float(1.0)),
            (".5", Float(0.5)),
            ("-.5", Float(-0.5)),
            ("1e3", Float(1000.0)),
            ("1.5E-2", Float(0.015)),
            ("1e400", Str),
            (".inf", NonFinite(".inf")),
            ("-.Inf", NonFinite("-.inf")),
            ("+.INF", NonFinite(".inf")),
            (".NaN", NonFinite(".nan")),
            (".", Str),
            ("1.2.3", Str),
            ("1:20", Str),
            ("2001-12-14", Str),
            ("-", Str),
            ("<<", Merge),
            ("v1", Str),
            ("8080/TCP", Str),
            // Go's ParseFloat takes `_` between digits after a leading `.`.
            (".5_5", Float(0.55)),
            ("._5", Str),
            (".5e1_0", Float(5e9)),
            (".5.", Str),
            ("1_0.5", Float(10.5)),
            ("1e1_0", Float(1e10)),
            // go-yaml's own `0b`/`0o` prefixes take a signed number.
            ("0b-1", Int(-1)),
            ("0b+1", Int(1)),
            ("0o-7", Int(-7)),
            ("0o+7", Int(7)),
            ("-0o7", Int(-7)),
            ("0x_1F", Int(31)),
        ];
        for (text, want) in cases {
            assert_eq!(resolve_plain(text), *want, "resolving {text:?}");
        }
    }

    #[test]
    fn yaml11_resolver_table() {
        use Plain::*;
        let cases: &[(&str, Plain)] = &[
            ("yes", Bool(true)),
            ("Y", Bool(true)),
            ("On", Bool(true)),
            ("Off", Bool(false)),
            ("n", Bool(false)),
            ("NO", Bool(false)),
            ("yEs", Str),
            ("true", Bool(true)),
            ("~", Null),
            ("0b-1", Int(-1)),
            ("0o-7", Str),
            ("0o+7", Str),
            ("-0o7", Int(-7)),
            ("0o17", Int(15)),
            ("<<", Str),
            (".5_5", Float(0.55)),
            ("2001-12-14", Str),
        ];
        for (text, want) in cases {
            assert_eq!(resolve_plain_yaml11(text), *want, "resolving {text:?}");
        }
    }

    #[test]
    fn go_yaml_v2_quotes_what_it_would_read_as_something_else() {
        // Checked against go-yaml v2.4.0's encoder.
        for s in [
            "",
            "~",
            "null",
            "Null",
            "NULL",
            "true",
            "True",
            "yes",
            "Y",
            "n",
            "on",
            "OFF",
            "0",
            "8080",
            "0755",
            "08",
            "0x1F",
            "0o17",
            "0b1",
            "0b-1",
            "0b+1",
            "1_000",
            "+1",
            ".5",
            ".5_5",
            ".5e1_0",
            "1e3",
            "1.",
            ".inf",
            "-.inf",
            "+.INF",
            ".NaN",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "1:20",
            "-1:20:30.5",
            "190:20:30.15",
            "1_0:20",
            "2001-12-14",
            "2002-1-2",
            "2004-02-29",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10",
            "2002-01-01  01:02:03",
            "2002-01-01T01:02:03,5Z",
            "2002-01-01T01:02:03+24:00",
        ] {
            assert!(go_yaml_v2_quotes(s), "{s:?} should be quoted");
        }
        for s in [
            "=",
            "<<",
            "a",
            "v1",
            "1.2.3",
            ".",
            "-",
            "1a",
            "0x",
            "0o-7",
            "0o8",
            "0b2",
            "yEs",
            "nULL",
            "nan",
            "inf",
            "._5",
            "._",
            "1e400",
            "-1e400",
            ".5e400",
            "0x10000000000000000",
            "1:60",
            "1:20:3x",
            "2002-02-29",
            "2002-13-02",
            "02002-01-01",
            "2002-01-01T01:02:03",
            "2002-01-01T25:02:03Z",
            "2001-12-14 21:59:43.10 -5",
            "8080/TCP",
            "1e",
            "e3",
        ] {
            assert!(!go_yaml_v2_quotes(s), "{s:?} should stay plain");
        }
    }
}
