//! Content-hash name suffixes of generated ConfigMaps and Secrets, computed exactly as
//! kustomize computes them.
//!
//! The hashed document is a JSON object with sorted keys holding the kind, an always-empty
//! name (kustomize looks the name up with a path its lookup does not understand), the
//! `data` map, and `binaryData` (ConfigMaps) or `type` and `stringData` (Secrets). It is
//! serialised the way Go's `encoding/json` does (HTML-safe escaping, Go number formatting),
//! hashed with SHA-256, and the first ten hex digits are made "unpronounceable" by mapping
//! a few digits and letters.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::resource::{Object, ResMap};

/// Why a content hash could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    /// Only ConfigMaps and Secrets get content-hash suffixes.
    #[error(
        "cannot compute a content hash for {kind} {name:?}: only ConfigMaps and Secrets are hashed"
    )]
    UnhashableKind {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
    },
}

/// The ten-character content-hash suffix kustomize appends to a generated object's name.
pub fn hash_suffix(obj: &Object) -> Result<String, HashError> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let document = match kind {
        "ConfigMap" => hashed_fields(obj, "ConfigMap", &[], &["binaryData"]),
        "Secret" => hashed_fields(obj, "Secret", &["type"], &["stringData"]),
        _ => {
            return Err(HashError::UnhashableKind {
                kind: kind.to_string(),
                name: object_name(obj).to_string(),
            });
        }
    };
    let mut json = String::new();
    write_go_json(&Value::Object(document), &mut json);
    Ok(encode_hex_prefix(&hex::encode(Sha256::digest(
        json.as_bytes(),
    ))))
}

/// Appends `-<hash>` to the name of every resource marked for it (remembering the old id
/// for name-reference fixing) and clears the mark.
pub fn apply_hash_suffixes(resmap: &mut ResMap) -> Result<(), HashError> {
    for resource in resmap.iter_mut() {
        if !resource.needs_hash_suffix {
            continue;
        }
        let suffix = hash_suffix(&resource.obj)?;
        let name = format!("{}-{suffix}", resource.name());
        resource.set_name(&name);
        resource.needs_hash_suffix = false;
    }
    Ok(())
}

fn object_name(obj: &Object) -> &str {
    obj.get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The document kustomize hashes: `kind`, `name` (always ""), `data`, the `always` fields
/// (present even when absent from the object, as ""), and the `if_map` fields only when
/// they hold a map.
fn hashed_fields(obj: &Object, kind: &str, always: &[&str], if_map: &[&str]) -> Object {
    let mut doc = Object::new();
    doc.insert("kind".into(), Value::String(kind.into()));
    doc.insert("name".into(), Value::String(String::new()));
    doc.insert("data".into(), field_value(obj.get("data")));
    for field in always {
        doc.insert((*field).into(), field_value(obj.get(*field)));
    }
    for field in if_map {
        match obj.get(*field) {
            Some(Value::Object(map)) => {
                doc.insert((*field).into(), Value::Object(map.clone()));
            }
            // A list decodes into Go's nil map, which still counts as a map.
            Some(Value::Array(_)) => {
                doc.insert((*field).into(), Value::Null);
            }
            _ => {}
        }
    }
    doc
}

/// How kustomize reads one field for hashing: scalars as their text, maps as maps, a
/// missing field as "".
fn field_value(value: Option<&Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::String(String::new()),
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Bool(b)) => Value::String(b.to_string()),
        Some(Value::Number(n)) => Value::String(n.to_string()),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        Some(Value::Array(_)) => Value::Null,
    }
}

/// Maps the first ten hex digits to kustomize's alphabet (avoids vowels-and-digit words).
fn encode_hex_prefix(hex: &str) -> String {
    hex.chars()
        .take(10)
        .map(|c| match c {
            '0' => 'g',
            '1' => 'h',
            '3' => 'k',
            'a' => 'm',
            'e' => 't',
            other => other,
        })
        .collect()
}

/// Serialises `value` as Go's `json.Marshal` would after a round trip through
/// `interface{}`: map keys sorted, HTML-safe string escaping, float64 number formatting.
fn write_go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => goyaml::go_json::write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                goyaml::go_json::write_string(out, key);
                out.push(':');
                if let Some(v) = map.get(key.as_str()) {
                    write_go_json(v, out);
                }
            }
            out.push('}');
        }
    }
}

/// A number as Go prints a float64 in JSON: shortest round-trip digits, plain notation
/// for magnitudes in [1e-6, 1e21), otherwise exponent notation like `1e+21` or `1e-7`.
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    let Some(f) = n.as_f64() else {
        return n.to_string();
    };
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (sign, digits, exponent) = shortest_digits(&format!("{f:e}"));
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        format!("{sign}{}", plain_notation(&digits, exponent))
    } else {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        let exp_abs = exponent.unsigned_abs();
        // Go pads the exponent to two digits, then json strips the pad of `e-0X`.
        let exp_text = if exp_abs < 10 && exponent >= 0 {
            format!("0{exp_abs}")
        } else {
            exp_abs.to_string()
        };
        format!("{sign}{}e{exp_sign}{exp_text}", mantissa(&digits))
    }
}

/// The sign, shortest round-trip digits and decimal exponent of a float, from the text of
/// Rust's `{:e}` (which gives the shortest digits for f32 and f64 alike).
pub(crate) fn shortest_digits(scientific: &str) -> (&'static str, String, i32) {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific, "0"));
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits = mantissa.chars().filter(char::is_ascii_digit).collect();
    (sign, digits, exponent.parse().unwrap_or(0))
}

/// `digits` as the mantissa of exponent notation: `d` or `d.ddd`.
pub(crate) fn mantissa(digits: &str) -> String {
    match digits.split_at_checked(1) {
        Some((first, rest)) if !rest.is_empty() => format!("{first}.{rest}"),
        _ => digits.to_string(),
    }
}

/// `digits` (d.ddd × 10^exponent) written without an exponent.
pub(crate) fn plain_notation(digits: &str, exponent: i32) -> String {
    let point = exponent + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("0.{zeros}{digits}")
    } else {
        let point = point as usize;
        if digits.len() <= point {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use serde_json::json;

    fn obj(value: Value) -> Object {
        match value {
            Value::Object(map) => map,
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn config_map_hashes_match_kustomize() {
        // TestMergeAndReplaceGenerators: `staging-configmap-in-overlay-dc6fm46dhm`.
        let cm = obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "staging-configmap-in-overlay", "labels": {"env": "staging"}},
            "data": {"hello": "world"}}));
        assert_eq!(hash_suffix(&cm).unwrap(), "dc6fm46dhm");
        // TestDataIsSingleQuote: `test-m8t7bmb6g2`.
        let cm = obj(json!({"kind": "ConfigMap", "metadata": {"name": "test"},
            "data": {"TEST": "'"}}));
        assert_eq!(hash_suffix(&cm).unwrap(), "m8t7bmb6g2");
    }

    #[test]
    fn secret_hashes_include_type() {
        // TestMergeAndReplaceGenerators: `...-secret-in-base-k2k4692t9g`.
        let secret = obj(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "x", "annotations": {"note": "n"}},
            "data": {"password": "c29tZXB3", "proxy": "aGFwcm94eQ==", "username": "YWRtaW4="}}),
        );
        assert_eq!(hash_suffix(&secret).unwrap(), "k2k4692t9g");
        let mut other_type = secret.clone();
        other_type.insert("type".into(), json!("kubernetes.io/tls"));
        assert_ne!(hash_suffix(&other_type).unwrap(), "k2k4692t9g");
    }

    #[test]
    fn names_labels_and_immutable_do_not_enter_the_hash() {
        let a = obj(json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}));
        let b = obj(json!({"kind": "ConfigMap", "immutable": true,
            "metadata": {"name": "b", "labels": {"x": "y"}}, "data": {"k": "v"}}));
        assert_eq!(hash_suffix(&a).unwrap(), hash_suffix(&b).unwrap());
        let c = obj(json!({"kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"k": "v"}, "binaryData": {}}));
        assert_ne!(hash_suffix(&a).unwrap(), hash_suffix(&c).unwrap());
    }

    #[test]
    fn go_json_escaping_and_numbers() {
        let mut out = String::new();
        write_go_json(
            &json!({"b": "<a&b>\u{2028}\n\u{1}\u{8}", "a": [1, 1.5, 1e21, 0.0000001, -2]}),
            &mut out,
        );
        assert_eq!(
            out,
            r#"{"a":[1,1.5,1e+21,1e-7,-2],"b":"\u003ca\u0026b\u003e\u2028\n\u0001\b"}"#
        );
        assert_eq!(
            go_number(&serde_json::Number::from(123456789u64)),
            "123456789"
        );
        let big = serde_json::Number::from_f64(1.5e300).unwrap();
        assert_eq!(go_number(&big), "1.5e+300");
        let small = serde_json::Number::from_f64(0.00012).unwrap();
        assert_eq!(go_number(&small), "0.00012");
        let mid = serde_json::Number::from_f64(1e20).unwrap();
        assert_eq!(go_number(&mid), "100000000000000000000");
    }

    #[test]
    fn other_kinds_cannot_be_hashed() {
        let deploy = obj(json!({"kind": "Deployment", "metadata": {"name": "d"}}));
        assert!(
            hash_suffix(&deploy)
                .unwrap_err()
                .to_string()
                .contains("Deployment")
        );
    }

    #[test]
    fn applies_suffixes_and_remembers_old_names() {
        let mut resmap = ResMap::new();
        let mut cm = Resource::new(obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "test"}, "data": {"TEST": "this is a 'test'"}})));
        cm.needs_hash_suffix = true;
        resmap.append(cm).unwrap();
        let plain = Resource::new(obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "plain"}})));
        resmap.append(plain).unwrap();
        apply_hash_suffixes(&mut resmap).unwrap();
        let names: Vec<&str> = resmap.iter().map(Resource::name).collect();
        // TestDataEndsWithQuotes.
        assert_eq!(names, ["test-k9cc55dfm5", "plain"]);
        let first = &resmap.as_slice()[0];
        assert!(!first.needs_hash_suffix);
        assert_eq!(first.org_id().name, "test");
    }
}
