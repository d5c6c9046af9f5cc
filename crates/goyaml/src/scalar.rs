//! Plain-scalar resolution as go-yaml v3 does it, plus the wider "would any common YAML
//! reader take this for something other than a string" test the writer uses for quoting.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Number, Value};

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
pub fn resolve_plain(s: &str) -> Plain {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Plain::NonFinite(".nan"),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Plain::NonFinite(".inf"),
        "-.inf" | "-.Inf" | "-.INF" => return Plain::NonFinite("-.inf"),
        "<<" => return Plain::Merge,
        _ => {}
    }
    match s.as_bytes()[0] {
        b'.' => yaml_float(s).map_or(Plain::Str, Plain::Float),
        b'0'..=b'9' | b'+' | b'-' => resolve_number(s),
        _ => Plain::Str,
    }
}

/// An untagged plain timestamp as kustomize passes it on: go-yaml v3 decodes it into a
/// `time.Time`, which JSON prints in RFC 3339 with nanoseconds (`2024-01-01` becomes
/// `2024-01-01T00:00:00Z`). `None` when `s` is not one of go-yaml's timestamp forms.
pub fn go_timestamp(s: &str) -> Option<String> {
    if !s.as_bytes().first()?.is_ascii_digit() {
        return None;
    }
    let (date, rest) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], Some((&s[i..i + 1], &s[i + 1..]))),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let year = fixed_digits(parts.next()?, 4)?;
    let month = short_number(parts.next()?)?;
    let day = short_number(parts.next()?)?;
    if parts.next().is_some() || !(1..=12).contains(&month) || day < 1 || day > days_in(year, month)
    {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    let Some((separator, time)) = rest else {
        return Some(format!("{date}T00:00:00Z"));
    };
    let (clock, zone) = if separator == " " {
        (time, "Z".to_string())
    } else {
        let split = time.find(['Z', '+', '-'])?;
        let zone = &time[split..];
        let zone = match zone {
            "Z" | "+00:00" => "Z".to_string(),
            _ => {
                let (sign, hm) = zone.split_at(1);
                let (h, m) = hm.split_once(':')?;
                let (h, m) = (fixed_digits(h, 2)?, fixed_digits(m, 2)?);
                if h > 23 || m > 59 {
                    return None;
                }
                format!("{sign}{h:02}:{m:02}")
            }
        };
        (&time[..split], zone)
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, fraction)) => (hms, Some(fraction)),
        None => (clock, None),
    };
    let mut fields = hms.split(':');
    let hour = short_number(fields.next()?)?;
    let minute = short_number(fields.next()?)?;
    let second = short_number(fields.next()?)?;
    if fields.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let fraction = match fraction {
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            let trimmed = f.trim_end_matches('0');
            if trimmed.is_empty() {
                String::new()
            } else {
                format!(".{trimmed}")
            }
        }
        Some(_) => return None,
        None => String::new(),
    };
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{fraction}{zone}"
    ))
}

fn fixed_digits(s: &str, len: usize) -> Option<u32> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

fn short_number(s: &str) -> Option<u32> {
    (matches!(s.len(), 1 | 2) && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn resolve_number(s: &str) -> Plain {
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
    yaml_float(plain).map_or(Plain::Str, Plain::Float)
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

/// Numbers, timestamps and sexagesimals in YAML 1.1 (PyYAML, go-yaml v2) or YAML 1.2 syntax.
static NUMERIC_LIKE: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives = [
        r"[-+]?0b[0-1_]+",
        r"[-+]?0[0-7_]+",
        r"[-+]?(?:0|[1-9][0-9_]*)",
        r"[-+]?0x[0-9a-fA-F_]+",
        r"[-+]?0o[0-7_]+",
        r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?",
        r"[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?",
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?",
        r"[-+]?\.(?:inf|Inf|INF)",
        r"\.(?:nan|NaN|NAN)",
        r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::?[0-9]{2})?))?)?",
    ];
    let pattern = format!("^(?:{})$", alternatives.join("|"));
    Regex::new(&pattern).unwrap_or_else(|_| unreachable!("constant pattern is valid"))
});

/// True when a plain scalar with this text would be read as something other than this string
/// by go-yaml v3, go-yaml v2 (YAML 1.1 booleans such as `yes`, `on`, `y`), PyYAML or a YAML
/// 1.2 core-schema reader. Such strings must be double-quoted.
pub(super) fn reads_as_non_string(s: &str) -> bool {
    if resolve_plain(s) != Plain::Str {
        return true;
    }
    if matches!(
        s,
        "y" | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
            | "="
    ) {
        return true;
    }
    matches!(s.as_bytes()[0], b'0'..=b'9' | b'+' | b'-' | b'.') && NUMERIC_LIKE.is_match(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_come_out_as_go_prints_them() {
        let cases = [
            ("2024-01-01", Some("2024-01-01T00:00:00Z")),
            (
                "2001-12-14t21:59:43.10-05:00",
                Some("2001-12-14T21:59:43.1-05:00"),
            ),
            ("2001-12-14T21:59:43Z", Some("2001-12-14T21:59:43Z")),
            ("2001-12-14 21:59:43.10", Some("2001-12-14T21:59:43.1Z")),
            ("2024-2-3", Some("2024-02-03T00:00:00Z")),
            ("2024-02-30", None),
            ("2001-12-14 21:59:43.10 -5", None),
            ("24-01-01", None),
            ("1.20", None),
            ("v2024-01-01", None),
        ];
        for (input, expected) in cases {
            assert_eq!(go_timestamp(input).as_deref(), expected, "{input}");
        }
    }

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
        ];
        for (text, want) in cases {
            assert_eq!(resolve_plain(text), *want, "resolving {text:?}");
        }
    }

    #[test]
    fn non_string_detection() {
        for s in [
            "",
            "~",
            "null",
            "true",
            "True",
            "yes",
            "Y",
            "n",
            "on",
            "OFF",
            "=",
            "<<",
            "0",
            "8080",
            "0755",
            "0x1F",
            "0o17",
            "0b1",
            "1_000",
            "1:20",
            "-1:20:30.5",
            ".5",
            "1e3",
            "1e400",
            "1.",
            "1.5",
            ".inf",
            "-.inf",
            ".NaN",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10 -5",
            "2002-1-2",
            "08",
            "+1",
        ] {
            assert!(reads_as_non_string(s), "{s:?} should need quoting");
        }
        for s in [
            "a", "v1", "1.2.3", ".", "-", "1a", "0x", "yess", "nope", "Yes!", "2001-12", "1:2:x",
            "latest", "8080/TCP", "1e", "e3", "-.", "0b2",
        ] {
            assert!(!reads_as_non_string(s), "{s:?} should stay plain");
        }
    }
}
