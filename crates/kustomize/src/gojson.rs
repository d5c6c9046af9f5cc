//! Decoding a parsed YAML document into a Rust type as kustomize decodes its files into Go
//! structs: with Go's `encoding/json`, behind `sigs.k8s.io/yaml`.
//!
//! - struct field names match case-insensitively (an exact match first; when several keys
//!   name one field, the last in sorted order wins, as the JSON Go writes from a YAML map
//!   is sorted);
//! - `null` leaves the target at its zero value (empty string, `false`, `0`, no list);
//! - a whole float decodes into an integer field (`3.0` is written `3` in the JSON);
//! - unknown fields are refused for kustomization files and `configurations:` files
//!   (strict decoding) and ignored in every other file (plugin configs, replacement files);
//! - where `sigs.k8s.io/yaml` converts (every file but the kustomization itself), a number
//!   or boolean given for a string field becomes its text (`1.10` is `1.1`, Go's `%g` of a
//!   float32), except fields Go declares in an embedded struct (the group, version, kind,
//!   name and namespace of selectors and field specs, every generator field), which its
//!   converter never looks into.
//!
//! Errors name the field at fault: `at fieldSpecs[0].create: invalid type: ...`.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;

/// What a decoder does with a field the target type does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownFields {
    /// Leave it to the type: one with `deny_unknown_fields` refuses it.
    Refuse,
    /// Drop it before the type sees it.
    Ignore,
}

/// How a file is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Unknown fields.
    pub unknown: UnknownFields,
    /// Whether numbers and booleans given for strings become their text.
    pub coerce: bool,
}

impl Mode {
    /// A kustomization file: strict, no conversion.
    pub const KUSTOMIZATION: Mode = Mode {
        unknown: UnknownFields::Refuse,
        coerce: false,
    };
    /// A `configurations:` file: strict, with `sigs.k8s.io/yaml`'s conversion.
    pub const STRICT: Mode = Mode {
        unknown: UnknownFields::Refuse,
        coerce: true,
    };
    /// A builtin plugin config or a replacement file: lenient, with conversion.
    pub const LENIENT: Mode = Mode {
        unknown: UnknownFields::Ignore,
        coerce: true,
    };
    /// A lenient decoding where Go's converter cannot see the target types (the
    /// replacements of a `ReplacementTransformer` config, declared in an embedded struct).
    pub const LENIENT_UNCONVERTED: Mode = Mode {
        unknown: UnknownFields::Ignore,
        coerce: false,
    };
}

/// Decodes `value` into `T` the way Go decodes the same document (see the module docs).
pub fn from_value<T: DeserializeOwned>(value: &Value, mode: Mode) -> Result<T, serde_json::Error> {
    T::deserialize(GoValue { value, mode })
}

/// Fields that Go declares in an embedded struct, by the Rust struct holding them: its
/// converter does not turn numbers given for them into strings. `None` stands for every
/// field but `metadata`.
const UNCONVERTED: &[(&str, Option<&[&str]>)] = &[
    ("FieldSpec", Some(&["group", "version", "kind"])),
    ("NameBackReference", Some(&["group", "version", "kind"])),
    (
        "Selector",
        Some(&["group", "version", "kind", "name", "namespace"]),
    ),
    (
        "SourceSelector",
        Some(&["group", "version", "kind", "name", "namespace"]),
    ),
    ("GeneratorPluginConfig", None),
];

/// Whether Go's converter sees field `field` of struct `name`.
fn converted(name: &str, field: &str) -> bool {
    match UNCONVERTED.iter().find(|(n, _)| *n == name) {
        Some((_, Some(fields))) => !fields.contains(&field),
        Some((_, None)) => field == "metadata",
        None => true,
    }
}

/// A value being decoded with Go's rules.
#[derive(Clone, Copy)]
struct GoValue<'a> {
    value: &'a Value,
    mode: Mode,
}

impl<'a> GoValue<'a> {
    fn child(&self, value: &'a Value) -> GoValue<'a> {
        GoValue {
            value,
            mode: self.mode,
        }
    }

    fn unconverted(mut self) -> Self {
        self.mode.coerce = false;
        self
    }

    /// The keys of a map decoded into struct `name` with `fields`: spelled as the field they
    /// match, unknown ones dropped when the mode ignores them, the last of a field kept.
    fn struct_entries(
        &self,
        map: &'a serde_json::Map<String, Value>,
        name: &str,
        fields: &'static [&'static str],
    ) -> Vec<(String, GoValue<'a>)> {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        let mut entries: Vec<(String, GoValue<'a>)> = Vec::with_capacity(keys.len());
        for key in keys {
            let field = fields
                .iter()
                .find(|f| **f == key.as_str())
                .or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key)));
            let canonical = match (field, self.mode.unknown) {
                (Some(field), _) => (*field).to_string(),
                (None, UnknownFields::Refuse) => key.clone(),
                (None, UnknownFields::Ignore) => continue,
            };
            let Some(value) = map.get(key.as_str()) else {
                continue;
            };
            let mut child = self.child(value);
            if !converted(name, &canonical) {
                child = child.unconverted();
            }
            entries.retain(|(k, _)| *k != canonical);
            entries.push((canonical, child));
        }
        entries
    }
}

/// A number or boolean as the text `sigs.k8s.io/yaml` gives a string field.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match n.as_f64() {
            Some(f) if n.is_f64() => go_g_float32(f),
            _ => n.to_string(),
        }),
        _ => None,
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)`: the shortest digits of the float32, written plain
/// unless the decimal exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`).
fn go_g_float32(f: f64) -> String {
    let single = f as f32;
    if single == 0.0 {
        return if single.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    if !single.is_finite() {
        return if single.is_nan() {
            "NaN"
        } else if single > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        }
        .to_string();
    }
    let (sign, digits, exponent) = crate::hash::shortest_digits(&format!("{single:e}"));
    if !(-4..6).contains(&exponent) {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{}e{exp_sign}{:02}",
            crate::hash::mantissa(&digits),
            exponent.unsigned_abs()
        );
    }
    format!("{sign}{}", crate::hash::plain_notation(&digits, exponent))
}

/// A whole float as an integer, as the JSON Go writes for it reads back.
fn whole(value: &Value) -> Option<Value> {
    let f = value.as_f64().filter(|_| value.is_f64())?;
    if f.fract() != 0.0 || f.abs() >= 1e19 {
        return None;
    }
    if f < 0.0 {
        Some(Value::from(f as i64))
    } else {
        Some(Value::from(f as u64))
    }
}

/// `error` as met within `segment` (a field name, or `[i]`): its message gets the path
/// `at <segment><inner path>: `.
fn within(segment: &str, error: serde_json::Error) -> serde_json::Error {
    let message = error.to_string();
    let (path, reason) = match message.strip_prefix("at ").and_then(|m| m.split_once(": ")) {
        Some((inner, reason)) if inner.starts_with('[') => (format!("{segment}{inner}"), reason),
        Some((inner, reason)) => (format!("{segment}.{inner}"), reason),
        None => (segment.to_string(), message.as_str()),
    };
    de::Error::custom(format!("at {path}: {reason}"))
}

/// The entries of a map or struct, each value decoded with Go's rules.
struct Entries<'a, K> {
    entries: std::vec::IntoIter<(K, GoValue<'a>)>,
    pending: Option<(String, GoValue<'a>)>,
}

impl<'a, K: AsRef<str>> Entries<'a, K> {
    fn new(entries: Vec<(K, GoValue<'a>)>) -> Self {
        Entries {
            entries: entries.into_iter(),
            pending: None,
        }
    }
}

impl<'de, K: AsRef<str>> de::MapAccess<'de> for Entries<'de, K> {
    type Error = serde_json::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let key = key.as_ref().to_string();
        let decoded = seed.deserialize(key.clone().into_deserializer())?;
        self.pending = Some((key, value));
        Ok(Some(decoded))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| de::Error::custom("a value without its key"))?;
        seed.deserialize(value).map_err(|e| within(&key, e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// The elements of a list, each decoded with Go's rules.
struct Elements<'a> {
    elements: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    parent: GoValue<'a>,
}

impl<'de> de::SeqAccess<'de> for Elements<'de> {
    type Error = serde_json::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        let Some((index, value)) = self.elements.next() else {
            return Ok(None);
        };
        seed.deserialize(self.parent.child(value))
            .map(Some)
            .map_err(|e| within(&format!("[{index}]"), e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.elements.len())
    }
}

/// The elements of `null`.
const NO_ELEMENTS: &[Value] = &[];

macro_rules! integer {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            match self.value {
                Value::Null => visitor.visit_u64(0),
                value => match whole(value) {
                    Some(integer) => integer.$method(visitor),
                    None => value.$method(visitor),
                },
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for GoValue<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Array(items) => visitor.visit_seq(Elements {
                elements: items.iter().enumerate(),
                parent: self,
            }),
            Value::Object(map) => visitor.visit_map(Entries::new(
                map.iter()
                    .map(|(k, v)| (k.as_str(), self.child(v)))
                    .collect(),
            )),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_bool(false),
            other => other.deserialize_bool(visitor),
        }
    }

    integer!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_f64(0.0),
            other => other.deserialize_f64(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_str(""),
            value if self.mode.coerce => match scalar_text(value) {
                Some(text) => visitor.visit_string(text),
                None => value.deserialize_string(visitor),
            },
            value => value.deserialize_string(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_seq(Elements {
                elements: NO_ELEMENTS.iter().enumerate(),
                parent: self,
            }),
            Value::Array(_) => self.deserialize_any(visitor),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_map(Entries::<&str>::new(Vec::new())),
            Value::Object(_) => self.deserialize_any(visitor),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_map(Entries::<&str>::new(Vec::new())),
            Value::Object(map) => {
                visitor.visit_map(Entries::new(self.struct_entries(map, name, fields)))
            }
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        char bytes byte_buf unit unit_struct identifier i128 u128
    }
}

#[cfg(test)]
mod tests;
