//! Scalars as kustomize's YAML layer sees them: the text of a scalar, the type an
//! untagged plain scalar resolves to, and the JSON encoding Go's `encoding/json` produces
//! for structured data kept inside string fields.

use serde_json::{Map, Number, Value};

pub(crate) use crate::resource::scalar_node_text as scalar_text;

/// Whether the value is a scalar (anything but a map or a list).
pub fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

/// The value an untagged plain scalar with this text decodes to (YAML 1.2 core schema as
/// kustomize's YAML library applies it: null, booleans, integers in any base, floats;
/// everything else, timestamps included, stays a string).
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let starts_numeric = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
    if !starts_numeric {
        return Value::String(text.to_string());
    }
    resolve_number(&text.replace('_', "")).unwrap_or_else(|| Value::String(text.to_string()))
}

fn resolve_number(plain: &str) -> Option<Value> {
    if let Some(n) = parse_go_int(plain) {
        return Some(Value::Number(n.into()));
    }
    if let Some(n) = parse_go_uint(plain) {
        return Some(Value::Number(n.into()));
    }
    if is_yaml_float(plain) {
        return plain.parse::<f64>().ok().and_then(float_value);
    }
    None
}

/// A finite float as JSON; integral values become integers, as they do once kustomize's
/// output passes through Go's JSON encoder.
pub fn float_value(f: f64) -> Option<Value> {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        // Integral and well inside the exactly representable range.
        return Some(Value::Number(Number::from(f as i64)));
    }
    Number::from_f64(f).map(Value::Number)
}

fn split_sign(s: &str) -> (bool, &str) {
    if let Some(rest) = s.strip_prefix('-') {
        (true, rest)
    } else {
        (false, s.strip_prefix('+').unwrap_or(s))
    }
}

/// Digits and radix of an integer literal with Go's base prefixes (`0x`, `0o`, `0b`, and a
/// bare leading `0` for octal).
fn radix_digits(s: &str) -> (u32, &str) {
    let lower = |p: &str| s.get(..2).is_some_and(|h| h.eq_ignore_ascii_case(p));
    if lower("0x") {
        (16, &s[2..])
    } else if lower("0o") {
        (8, &s[2..])
    } else if lower("0b") {
        (2, &s[2..])
    } else if s.len() > 1 && s.starts_with('0') {
        (8, &s[1..])
    } else {
        (10, s)
    }
}

fn parse_go_int(s: &str) -> Option<i64> {
    let (negative, rest) = split_sign(s);
    let (radix, digits) = radix_digits(rest);
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

fn parse_go_uint(s: &str) -> Option<u64> {
    let rest = s.strip_prefix('+').unwrap_or(s);
    let (radix, digits) = radix_digits(rest);
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_yaml_float(s: &str) -> bool {
    let (_, rest) = split_sign(s);
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let all_digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && all_digits(frac),
        Some((int, frac)) => !int.is_empty() && all_digits(int) && all_digits(frac),
        None => !mantissa.is_empty() && all_digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let (_, digits) = split_sign(e);
        !digits.is_empty() && all_digits(digits)
    });
    mantissa_ok && exponent_ok
}

/// Encodes `value` as Go's `encoding/json` does for a decoded YAML document: map keys
/// sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped; two-space indentation when `pretty`.
pub fn go_json(value: &Value, pretty: bool) -> String {
    let sorted = sort_keys(value);
    let text = if pretty {
        serde_json::to_string_pretty(&sorted)
    } else {
        serde_json::to_string(&sorted)
    }
    .unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}

fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut sorted = Map::new();
            for key in keys {
                sorted.insert(key.clone(), sort_keys(&map[key.as_str()]));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        Value::Number(n) => n
            .as_f64()
            .filter(|_| n.is_f64())
            .and_then(float_value)
            .unwrap_or_else(|| value.clone()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_scalars_resolve_like_yaml_core_schema() {
        assert_eq!(resolve_plain("8080"), json!(8080));
        assert_eq!(resolve_plain("-12"), json!(-12));
        assert_eq!(resolve_plain("1_000"), json!(1000));
        assert_eq!(resolve_plain("0x1F"), json!(31));
        assert_eq!(resolve_plain("0o17"), json!(15));
        assert_eq!(resolve_plain("0755"), json!(493));
        assert_eq!(resolve_plain("08"), json!(8));
        assert_eq!(resolve_plain("1.5"), json!(1.5));
        assert_eq!(resolve_plain(".5"), json!(0.5));
        assert_eq!(resolve_plain("2e3"), json!(2000));
        assert_eq!(resolve_plain("true"), json!(true));
        assert_eq!(resolve_plain("FALSE"), json!(false));
        assert_eq!(resolve_plain(""), Value::Null);
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("yes"), json!("yes"));
        assert_eq!(resolve_plain("1.2.3"), json!("1.2.3"));
        assert_eq!(resolve_plain("2001-12-14"), json!("2001-12-14"));
        assert_eq!(resolve_plain("-"), json!("-"));
        assert_eq!(resolve_plain(".inf"), json!(".inf"));
        assert_eq!(
            resolve_plain("18446744073709551615"),
            json!(18446744073709551615u64)
        );
    }

    #[test]
    fn scalar_text_of_each_kind() {
        assert_eq!(scalar_text(&json!("a")).as_deref(), Some("a"));
        assert_eq!(scalar_text(&json!(80)).as_deref(), Some("80"));
        assert_eq!(scalar_text(&json!(false)).as_deref(), Some("false"));
        assert_eq!(scalar_text(&Value::Null).as_deref(), Some(""));
        assert_eq!(scalar_text(&json!({"a": 1})), None);
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_html() {
        let v = json!({"b": {"z": 1, "a": [2.0, "<&>"]}, "a": true});
        assert_eq!(
            go_json(&v, false),
            r#"{"a":true,"b":{"a":[2,"\u003c\u0026\u003e"],"z":1}}"#
        );
        assert_eq!(go_json(&json!({"k": {}}), true), "{\n  \"k\": {}\n}");
    }
}
